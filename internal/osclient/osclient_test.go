package osclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tlsclient"
)

func answer(status int, body string) error {
	return gophercloud.ErrUnexpectedResponseCode{URL: "https://keystone.example/v3/x", Method: "POST",
		Expected: []int{201}, Actual: status, Body: []byte(body)}
}

func TestClassify(t *testing.T) {
	long := strings.Repeat("x", 250)
	cases := map[string]struct {
		err     error
		secrets []string
		want    Answer
	}{
		"nil": {nil, nil, Answer{}},
		"Keystone's error body": {answer(404, `{"error":{"code":404,"message":"Could not find application credential: abc.","title":"Not Found"}}`), nil,
			Answer{404, "Could not find application credential: abc."}},
		"Nova's fault body": {answer(403, `{"forbidden":{"code":403,"message":"Quota exceeded, too many server groups."}}`), nil,
			Answer{403, "Quota exceeded, too many server groups."}},
		"wrapped": {fmt.Errorf("create: %w", answer(409, `{"error":{"message":"Conflict occurred"}}`)), nil,
			Answer{409, "Conflict occurred"}},
		"HTML with a title": {answer(502, "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"), nil,
			Answer{502, "non-JSON answer: 502 Bad Gateway"}},
		"HTML without a title": {answer(500, "<html><body>oops</body></html>"), nil,
			Answer{500, "non-JSON answer (30 bytes of HTML)"}},
		"plain text, first line": {answer(503, "Service Unavailable\nretry later"), nil, Answer{503, "Service Unavailable"}},
		"plain text, cut short":  {answer(500, long), nil, Answer{500, strings.Repeat("x", 200) + "…"}},
		"secret echoed back": {answer(401, `{"error":{"message":"bad secret s3cret"}}`), []string{"", "s3cret"},
			Answer{401, "bad secret [REDACTED]"}},
		"transport error": {&url.Error{Op: "Post", URL: "https://keystone.example/v3", Err: errors.New("connection refused")}, nil,
			Answer{0, `Post "https://keystone.example/v3": connection refused`}},
		"cancelled, even around an answer": {errors.Join(context.Canceled, answer(500, "x")), nil,
			Answer{0, "context canceled\n" + answer(500, "x").Error()}},
		"deadline": {fmt.Errorf("wait: %w", context.DeadlineExceeded), nil, Answer{0, "wait: context deadline exceeded"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Classify(c.err, c.secrets...); got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestSentinels(t *testing.T) {
	notFound, conflict, other := errors.New("not found"), errors.New("conflict"), errors.New("other")
	s := Sentinels{notFound: http.StatusNotFound, conflict: http.StatusConflict}
	cases := []struct {
		status int
		target error
		want   bool
	}{
		{404, notFound, true}, {409, conflict, true}, {404, conflict, false},
		{0, notFound, false}, {404, other, false}, {500, notFound, false},
	}
	for _, c := range cases {
		if got := s.Match(c.status, c.target); got != c.want {
			t.Errorf("Match(%d, %v) = %v", c.status, c.target, got)
		}
	}
}

func TestNewProvider(t *testing.T) {
	hc := &http.Client{}
	p, err := NewProvider("https://keystone.example/v3", hc, "magnum-conductor/1")
	if err != nil {
		t.Fatal(err)
	}
	if ua := p.UserAgent.Join(); !strings.HasPrefix(ua, "magnum-conductor/1 magnum-capi-bridge") {
		t.Errorf("User-Agent %q", ua)
	}
	if p, err := NewProvider("https://keystone.example/v3", nil, ""); err != nil || p.HTTPClient.Timeout != tlsclient.DefaultTimeout {
		t.Errorf("the default HTTP client: %v %+v", err, p.HTTPClient)
	}
	if _, err := NewProvider("://no-scheme", hc, ""); err == nil {
		t.Error("a URL that does not parse is refused")
	}
}
