/**
 * One contextengine client shared by the three drop-ins: each is made either with a `target`
 * (it makes a client and closes it on `close()`) or with the `connection` of another (shared,
 * closed by its maker only).
 */
import { ContextEngineClient, type ContextEngineClientOptions } from "@contextengine/client";

/** How a drop-in reaches the engine: exactly one of `target` and `connection`. */
export type ConnectionInit =
  | { target: string; clientOptions?: ContextEngineClientOptions; connection?: undefined }
  | { connection: Connection; target?: undefined };

/** A client and whether its holder made it. */
export class Connection {
  private constructor(
    readonly client: ContextEngineClient,
    private readonly owned: boolean,
  ) {}

  /** The connection a drop-in's constructor argument names. */
  static of(init: ConnectionInit): Connection {
    if (init.connection !== undefined) {
      if (init.target !== undefined) {
        throw new TypeError("pass either target or connection, not both");
      }
      return new Connection(init.connection.client, false);
    }
    if (!init.target) {
      throw new TypeError("pass target (host:port of the sidecar) or connection");
    }
    return new Connection(new ContextEngineClient(init.target, init.clientOptions ?? {}), true);
  }

  /** A connection over a client the caller made and closes. */
  static over(client: ContextEngineClient): Connection {
    return new Connection(client, false);
  }

  /** Closes the client if this connection made it. */
  release(): void {
    if (this.owned) {
      this.client.close();
    }
  }
}
