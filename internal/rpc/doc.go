// Package rpc speaks oslo.messaging's RabbitMQ RPC protocol, the way magnum-api and
// magnum-conductor do, on top of amqp091-go, so that either side can be this service.
//
//   - OptionsFromConfig reads the magnum.conf keys that shape the wire ([DEFAULT]
//     transport_url, control_exchange, [conductor] topic, [oslo_messaging_rabbit] …), so that
//     every exchange and queue is declared exactly as the Python services declare it.
//   - The codec (DecodeMessage, EncodeMessage, EncodeReply, DecodeReply) handles the 2.0
//     envelope (1.0 accepted on input), the inner message keys and the `_context_*` keys
//     (Context), and writes JSON the way Python's json.dumps does (package pyjson), so that
//     re-encoding a captured message reproduces it byte for byte.
//   - Server consumes the conductor queues and dispatches to Handlers with at-least-once
//     delivery, duplicate suppression, per-cluster ordering, oslo-compatible failures, a
//     parking queue for bad input, reconnects and graceful shutdown (see Server).
//   - Client sends casts and calls as magnum-api does (for tests, benchmarks and tools).
//
// Arguments stay raw JSON (map[string]json.RawMessage); decoding Magnum's versioned objects is
// internal/magnum's job. Secrets (the Keystone token and token body, passwords, trust ids,
// broker passwords) are redacted from every printable form of Context, Request and Options.
package rpc
