"""A real oslo.messaging notification listener (as Ceilometer runs one) for the tests.

Usage: notification_listener.py TRANSPORT_URL EXCHANGE TOPIC
Prints "READY" once listening, then one JSON line per notification:
{"priority", "publisher_id", "event_type", "payload", "context"}; exits when stdin closes.
"""
import json
import sys

from oslo_config import cfg
import oslo_messaging


def main():
    url, exchange, topic = sys.argv[1:4]
    conf = cfg.ConfigOpts()
    conf([], project="mcb-notification-listener")
    transport = oslo_messaging.get_notification_transport(conf, url=url)
    targets = [oslo_messaging.Target(topic=topic, exchange=exchange)]

    class Endpoint:
        def _out(self, priority, ctxt, publisher_id, event_type, payload):
            print(json.dumps({"priority": priority, "publisher_id": publisher_id, "event_type": event_type,
                              "payload": payload, "context": ctxt}), flush=True)

        def info(self, ctxt, publisher_id, event_type, payload, metadata):
            self._out("INFO", ctxt, publisher_id, event_type, payload)

        def error(self, ctxt, publisher_id, event_type, payload, metadata):
            self._out("ERROR", ctxt, publisher_id, event_type, payload)

    listener = oslo_messaging.get_notification_listener(transport, targets, [Endpoint()], executor="threading")
    listener.start()
    print("READY", flush=True)
    sys.stdin.read()
    listener.stop()
    listener.wait()


if __name__ == "__main__":
    main()
