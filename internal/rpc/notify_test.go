package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestNotificationsReachOsloListener publishes with Notifier to a real oslo.messaging
// notification listener (Debian's python3-oslo.messaging, as Ceilometer uses it) on RabbitMQ, in
// both formats (messagingv2 and messaging), at INFO and ERROR.
func TestNotificationsReachOsloListener(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import oslo_messaging").Run(); err != nil {
		t.Skip("Debian python3-oslo.messaging is not installed (deploy/local installs it with magnum-api): " + err.Error())
	}
	b := rpctestNewVhost(t)
	o, _ := testOptions(t, b)
	transport := fmt.Sprintf("rabbit://%s:%s@%s:%d/%s", b.User, b.Password, b.Host, b.Port, b.Vhost)
	topic := "notifications-" + o.Topic
	cmd := exec.Command("/usr/bin/python3", filepath.Join("testdata", "notification_listener.py"), transport, o.Exchange, topic)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	lines := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the listener exited")
			}
			return l
		case <-time.After(60 * time.Second):
			t.Fatal("nothing from the listener within 60 s")
		}
		return ""
	}
	if l := next(); l != "READY" {
		t.Fatalf("listener: %s", l)
	}

	n, err := NewNotifier(o, []string{topic})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	rctx := testContext()
	rctx.RequestID = "req-notify-1"
	for _, tc := range []struct {
		priority string
		v1       bool
	}{{"INFO", false}, {"ERROR", false}, {"INFO", true}} {
		payload := fmt.Sprintf(`{"outcome": %q, "v1": %t}`, tc.priority, tc.v1)
		err := n.Notify(context.Background(), &Notification{PublisherID: "container-infra.test", EventType: "magnum.cluster.create",
			Priority: tc.priority, Payload: json.RawMessage(payload), Context: rctx, Version1: tc.v1})
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Priority    string         `json:"priority"`
			PublisherID string         `json:"publisher_id"`
			EventType   string         `json:"event_type"`
			Payload     map[string]any `json:"payload"`
			Context     map[string]any `json:"context"`
		}
		line := next()
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if got.Priority != tc.priority || got.EventType != "magnum.cluster.create" || got.PublisherID != "container-infra.test" ||
			got.Payload["outcome"] != tc.priority || got.Payload["v1"] != tc.v1 {
			t.Errorf("received %s", line)
		}
		if got.Context["request_id"] != "req-notify-1" || got.Context["auth_token"] != nil {
			t.Errorf("context as received: %v", got.Context)
		}
	}
}
