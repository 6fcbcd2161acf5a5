package rpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Probe connects to the brokers of the transport URL, logs in to the virtual host and opens a
// channel, as the server will. It succeeds when one host does (the server fails over like
// oslo.messaging); otherwise the error names every host (never its password) and why it failed.
func (o Options) Probe(ctx context.Context) error {
	if err := o.validate(); err != nil {
		return err
	}
	vhost := o.VirtualHost
	if vhost == "" {
		vhost = "/"
	}
	var failures []string
	for _, h := range o.Hosts {
		conn, err := o.dialHost(ctx, h, "check")
		if err == nil {
			ch, cerr := conn.Channel()
			if cerr == nil {
				_ = ch.Close()
			}
			_ = conn.Close()
			if err = cerr; err == nil {
				return nil
			}
		}
		failures = append(failures, fmt.Sprintf("%s: %v", hostAddr(h), err))
	}
	if len(failures) == 0 {
		return errors.New("no broker host")
	}
	return fmt.Errorf("cannot open virtual host %q on any broker: %s", vhost, strings.Join(failures, "; "))
}
