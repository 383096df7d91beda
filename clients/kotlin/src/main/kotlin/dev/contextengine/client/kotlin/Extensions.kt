package dev.contextengine.client.kotlin

import com.google.gson.Gson
import com.google.protobuf.Struct
import com.google.protobuf.util.JsonFormat
import dev.contextengine.client.ContextEngineClient as JavaContextEngineClient
import dev.contextengine.client.ContextEngineException
import dev.contextengine.client.Fingerprint
import dev.contextengine.client.SessionRef
import dev.contextengine.v1.BuildContextRequest
import dev.contextengine.v1.BuildContextResponse
import dev.contextengine.v1.Content
import dev.contextengine.v1.Event
import dev.contextengine.v1.Session
import dev.contextengine.v1.SubscribeEventsResponse
import dev.contextengine.v1.SubscribedEvent
import kotlin.time.Duration
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.transform

/**
 * How a followed stream ([ContextEngineClient.subscribeEvents],
 * [ContextEngineClient.watchSessionState]) recovers.
 *
 * @property maxFailures failures in a row, without a frame in between, before the flow fails
 * @property idleTimeout a stream silent this long is reopened; `null`: three heartbeat intervals
 *   plus 5 s (the request's `heartbeat_seconds`, or the server's 15 s)
 * @property headers extra request headers (gRPC metadata, ASCII values)
 * @property onReconnect called before each reopening with the error and the failures in a row
 */
data class FollowOptions(
    val maxFailures: Int = 5,
    val idleTimeout: Duration? = null,
    val headers: Map<String, String> = emptyMap(),
    val onReconnect: ((ContextEngineException, Int) -> Unit)? = null,
) {
    init {
        require(maxFailures >= 1) { "maxFailures must be at least 1" }
        require(idleTimeout == null || idleTimeout.isPositive()) { "idleTimeout must be positive" }
    }
}

/** The address of a session, for the calls that take a [SessionRef]. */
val Session.ref: SessionRef
    get() = SessionRef.of(this)

/** The cursor a subscription frame carries (`""` for none); a batch's is its last event's. */
val SubscribeEventsResponse.cursor: String
    get() = JavaContextEngineClient.frameCursor(this)

/** The recorded events a frame carries (a batch flattened; none for caught_up or heartbeats). */
val SubscribeEventsResponse.recorded: List<SubscribedEvent>
    get() = JavaContextEngineClient.eventsOf(this)

/** Only the recorded events of a subscription, batches flattened, in order. */
fun Flow<SubscribeEventsResponse>.recordedEvents(): Flow<SubscribedEvent> = transform { frame ->
    for (event in frame.recorded) emit(event)
}

/** The text parts of a content, joined. */
val Content.text: String
    get() = partsList.joinToString("") { it.text }

/** The text of an event's content. */
val Event.text: String
    get() = content.text

/** A content with one text part. */
fun textContent(role: String, text: String): Content = SessionRef.text(role, text)

/**
 * An event by `author` in an invocation with one text part (role "user" for the user, else
 * "model").
 */
fun said(author: String, invocationId: String, text: String): Event =
    SessionRef.said(author, invocationId, text)

/** A session address. */
fun sessionRef(appName: String, userId: String, sessionId: String): SessionRef =
    SessionRef(appName, userId, sessionId)

/**
 * The prompt-cache fingerprint of this context computed in the client (the Java client's RFC 8785
 * implementation); equal to [BuildContextResponse.getFingerprint] when client and server agree.
 */
fun BuildContextResponse.clientFingerprint(request: BuildContextRequest): String =
    Fingerprint.of(request, contentsList, cacheableContentsCount)

private val GSON = Gson()

/** JSON-like values (maps, lists, strings, numbers, booleans, null) as a protobuf Struct. */
fun Map<String, Any?>.toStruct(): Struct =
    Struct.newBuilder().also { JsonFormat.parser().merge(GSON.toJson(this), it) }.build()

/** A Struct as plain Kotlin values (numbers are Doubles, as in JSON). */
@Suppress("UNCHECKED_CAST")
fun Struct.toMap(): Map<String, Any?> = Fingerprint.json(this) as Map<String, Any?>
