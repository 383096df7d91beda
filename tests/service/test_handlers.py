"""The handler wrapper serves every gRPC cardinality with the same size limit and error mapping."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    json_format,
    message_factory,
    struct_pb2,
)
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from contextengine.core.errors import ContextEngineError
from contextengine.service._handlers import generic_handler

pytestmark = pytest.mark.service

LIMIT = 1024


def _service() -> Any:
    """A test service over Struct with one method of each cardinality, in a private pool."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(struct_pb2.DESCRIPTOR.serialized_pb)
    struct = ".google.protobuf.Struct"
    methods = [
        ("One", False, False),
        ("Many", False, True),
        ("Sum", True, False),
        ("Echo", True, True),
    ]
    pool.Add(
        descriptor_pb2.FileDescriptorProto(
            name="handlers_test.proto",
            package="handlers_test",
            dependency=["google/protobuf/struct.proto"],
            service=[
                descriptor_pb2.ServiceDescriptorProto(
                    name="T",
                    method=[
                        descriptor_pb2.MethodDescriptorProto(
                            name=name,
                            input_type=struct,
                            output_type=struct,
                            client_streaming=client,
                            server_streaming=server,
                        )
                        for name, client, server in methods
                    ],
                )
            ],
        )
    )
    return pool.FindServiceByName("handlers_test.T")


SERVICE = _service()
Struct = message_factory.GetMessageClass(SERVICE.methods_by_name["One"].input_type)


def _n(message: Any) -> float:
    if "fail" in message.fields:
        raise ContextEngineError("INVALID_ARGUMENT", "asked to fail", field="fail")
    return float(message.fields["n"].number_value)


def _msg(n: float, **extra: str) -> Any:
    return json_format.ParseDict({"n": n, **extra}, Struct())


class Servicer:
    async def One(self, request: Any, context: object) -> Any:
        return _msg(_n(request) + 1)

    async def Many(self, request: Any, context: object) -> AsyncIterator[Any]:
        for i in range(int(_n(request))):
            yield _msg(i)

    async def Sum(self, requests: AsyncIterator[Any], context: object) -> Any:
        return _msg(sum([_n(r) async for r in requests]))

    async def Echo(self, requests: AsyncIterator[Any], context: object) -> AsyncIterator[Any]:
        async for request in requests:
            yield _msg(_n(request) * 2)


@pytest.fixture
async def channel() -> AsyncIterator[grpc.aio.Channel]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((generic_handler(SERVICE, Servicer(), LIMIT),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        yield ch
    await server.stop(None)


def _stub(channel: grpc.aio.Channel, name: str) -> Any:
    method = SERVICE.methods_by_name[name]
    factory = {
        (False, False): channel.unary_unary,
        (False, True): channel.unary_stream,
        (True, False): channel.stream_unary,
        (True, True): channel.stream_stream,
    }[(method.client_streaming, method.server_streaming)]
    return factory(
        f"/handlers_test.T/{name}",
        request_serializer=Struct.SerializeToString,
        response_deserializer=Struct.FromString,
    )


async def _gen(*messages: Any) -> AsyncIterator[Any]:
    for message in messages:
        yield message


async def test_every_cardinality_is_served(channel: grpc.aio.Channel) -> None:
    assert _n(await _stub(channel, "One")(_msg(1))) == 2
    assert [_n(m) async for m in _stub(channel, "Many")(_msg(3))] == [0, 1, 2]
    assert _n(await _stub(channel, "Sum")(_gen(_msg(1), _msg(2), _msg(3)))) == 6
    assert [_n(m) async for m in _stub(channel, "Echo")(_gen(_msg(1), _msg(5)))] == [2, 10]


async def _drain(call: Any) -> None:
    if hasattr(call, "__aiter__"):
        async for _ in call:
            pass
    else:
        await call


async def _reason(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await _drain(call)
    status = rpc_status.from_call(err.value)
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    return err.value.code(), info.reason


@pytest.mark.parametrize("name", ["One", "Many", "Sum", "Echo"])
async def test_errors_and_size_limit_in_every_cardinality(
    channel: grpc.aio.Channel, name: str
) -> None:
    method = SERVICE.methods_by_name[name]
    big = _msg(1, pad="x" * (2 * LIMIT))
    failing = _msg(1, fail="yes")
    for request, expected in [
        (big, (grpc.StatusCode.RESOURCE_EXHAUSTED, "REQUEST_TOO_LARGE")),
        (failing, (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")),
    ]:
        argument = _gen(_msg(1), request) if method.client_streaming else request
        assert await _reason(_stub(channel, name)(argument)) == expected
