"""An A2A 1.0 client session against one persona of `apiary up --a2a-addr`, driven by the
official SDK (a2a-sdk). argv: the persona's base URL, a valid token, the persona's public key (hex,
as `up` printed it). Prints one JSON object with what each step saw; the Rust test asserts on it."""

import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver
from a2a.types import a2a_pb2 as pb
from a2a.utils.signing import create_signature_verifier
from cryptography.hazmat.primitives.asymmetric import ec
from google.protobuf import json_format


def verified(card):
    """The SDK's own verifier, with the key taken from the persona's Nostr key (x-only, even y),
    not from anything the card says."""
    key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256K1(), bytes.fromhex("02" + PUBKEY))
    try:
        create_signature_verifier(lambda kid, jku: key, ["ES256K"])(card)
        return True
    except Exception as e:
        return f"{type(e).__name__}: {e}"

BASE, TOKEN, PUBKEY = sys.argv[1], sys.argv[2], sys.argv[3]


def message(text, context=None):
    m = pb.Message(role=pb.Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[pb.Part(text=text)])
    if context:
        m.context_id = context
    return pb.SendMessageRequest(message=m)


def client_for(http, card, streaming):
    return ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)


async def error_of(coro):
    try:
        await coro
        return None
    except Exception as e:  # the SDK's typed errors; their names and text are what a user sees
        return f"{type(e).__name__}: {e}"


async def first(gen):
    async for ev in gen:
        return ev


async def main():
    seen = {}
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(headers=auth, timeout=60) as http:
        raw = (await http.get(f"{BASE}/.well-known/agent-card.json")).json()
        strict = json_format.ParseDict(raw, pb.AgentCard(), ignore_unknown_fields=False)
        seen["card"] = {"name": strict.name, "url": strict.supported_interfaces[0].url,
                        "schemes": list(strict.security_schemes.keys())}
        card = await A2ACardResolver(http, BASE).get_agent_card()
        seen["signature"] = verified(card)
        seen["kid"] = json.loads(__import__("base64").urlsafe_b64decode(
            card.signatures[0].protected + "==").decode())["kid"]
        forged = pb.AgentCard()
        forged.CopyFrom(card)
        forged.description = "a card someone else rewrote"
        seen["forged_signature"] = verified(forged)

        # SendMessage: a completed task with the reply as its artifact; same context, same session.
        plain = client_for(http, card, False)
        ev = await first(plain.send_message(message("hello over a2a")))
        task = ev.task
        seen["send"] = {"state": pb.TaskState.Name(task.status.state),
                        "reply": task.artifacts[0].parts[0].text, "context": task.context_id}
        got = await plain.get_task(pb.GetTaskRequest(id=task.id))
        seen["get"] = {"state": pb.TaskState.Name(got.status.state), "id": got.id == task.id}
        seen["get_unknown"] = await error_of(plain.get_task(pb.GetTaskRequest(id="no-such-task")))

        # SendStreamingMessage: the events in order.
        streaming = client_for(http, card, True)
        kinds = []
        async for ev in streaming.send_message(message("stream me", task.context_id)):
            kinds.append(ev.WhichOneof("payload"))
            if ev.HasField("status_update"):
                kinds[-1] += ":" + pb.TaskState.Name(ev.status_update.status.state)
            if ev.HasField("artifact_update"):
                seen["stream_reply"] = ev.artifact_update.artifact.parts[0].text
        seen["stream"] = kinds

        # CancelTask while the agent is still working (`!slow` holds the turn).
        slow = streaming.send_message(message("!slow"))
        started = await slow.__anext__()
        task_id = started.task.id
        await slow.__anext__()  # working
        canceled = await plain.cancel_task(pb.CancelTaskRequest(id=task_id))
        seen["cancel"] = pb.TaskState.Name(canceled.status.state)
        async for ev in slow:
            if ev.HasField("status_update"):
                seen["cancel_final"] = pb.TaskState.Name(ev.status_update.status.state)
        seen["cancel_again"] = await error_of(plain.cancel_task(pb.CancelTaskRequest(id=task_id)))

    # No token and a wrong token: refused before any turn.
    for name, headers in [("no_token", {}), ("wrong_token", {"Authorization": "Bearer nope"})]:
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            c = client_for(http, card, False)
            seen[name] = await error_of(first(c.send_message(message("let me in"))))

    # An A2A 0.3 client (`message/send`, no A2A-Version header): refused with the protocol's error.
    async with httpx.AsyncClient(headers=auth, timeout=30) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "message/send",
                "params": {"message": {"messageId": "m1", "role": "user", "kind": "message",
                                       "parts": [{"kind": "text", "text": "hi"}]}}}
        r = await http.post(BASE, json=body)
        seen["v03"] = r.json()["error"]
    print(json.dumps(seen))


asyncio.run(main())
