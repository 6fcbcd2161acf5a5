package keystone

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// A value that no redaction placeholder could contain by accident.
const sampleSecret = "s3cr3t-VALUE-4d1f0c2a9b"

func sampleCredentials() ClusterCredentials {
	cred := func(p Purpose, id string) ApplicationCredential {
		return ApplicationCredential{
			ID: id, Name: CredentialName("6f1c2b1e-3c1d-4b0a-9a57-0c7c0f6f1e2d", p, 0), Purpose: p,
			UserID: "u1", ProjectID: "p1", Roles: []string{"member"},
			ExpiresAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), Secret: NewSecret(sampleSecret + string(p)),
		}
	}
	return ClusterCredentials{
		ClusterUUID: "6f1c2b1e-3c1d-4b0a-9a57-0c7c0f6f1e2d", UserID: "u1", ProjectID: "p1",
		CAPO: cred(PurposeCAPO, "id-capo"), Workload: cred(PurposeWorkload, "id-workload"),
	}
}

// Every formatting and encoding path that could reach a log must hide the secret but keep the
// non-secret fields that make a log line useful.
func TestSecretsAreRedactedEverywhere(t *testing.T) {
	creds := sampleCredentials()
	cred := creds.CAPO
	ptr := &creds

	var outputs = map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s"} {
		outputs["secret "+verb] = fmt.Sprintf(verb, cred.Secret)
		outputs["credential "+verb] = fmt.Sprintf(verb, cred)
		outputs["cluster "+verb] = fmt.Sprintf(verb, creds)
		outputs["pointer "+verb] = fmt.Sprintf(verb, ptr)
		outputs["slice "+verb] = fmt.Sprintf(verb, []ApplicationCredential{cred})
		outputs["anonymous struct "+verb] = fmt.Sprintf(verb, struct{ S Secret }{cred.Secret})
	}
	outputs["Sprint"] = fmt.Sprint(cred, creds, cred.Secret)
	outputs["Errorf"] = fmt.Errorf("wrapped: %v", creds).Error()

	for name, v := range map[string]any{"credential": cred, "cluster": creds, "secret": cred.Secret} {
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json %s: %v", name, err)
		}
		outputs["json "+name] = string(j)
		y, err := yaml.Marshal(v)
		if err != nil {
			t.Fatalf("yaml %s: %v", name, err)
		}
		outputs["yaml "+name] = string(y)
	}

	var text, jsonLog bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("created", "creds", creds, "cred", cred, "secret", cred.Secret, "ptr", ptr)
	slog.New(slog.NewJSONHandler(&jsonLog, nil)).Info("created", "creds", creds, "cred", cred, "secret", cred.Secret, "ptr", ptr)
	outputs["slog text"] = text.String()
	outputs["slog json"] = jsonLog.String()

	for name, out := range outputs {
		if strings.Contains(out, sampleSecret) {
			t.Errorf("%s leaks the secret: %s", name, out)
		}
		hex := fmt.Sprintf("%x", sampleSecret)
		if strings.Contains(strings.ToLower(out), hex) {
			t.Errorf("%s leaks the secret hex-encoded: %s", name, out)
		}
	}
	// Redaction must not make the output useless.
	for _, name := range []string{"credential %v", "cluster %+v", "slog text", "slog json", "json cluster"} {
		if !strings.Contains(outputs[name], "id-capo") || !strings.Contains(outputs[name], redacted) {
			t.Errorf("%s should show the credential id and the redaction marker: %s", name, outputs[name])
		}
	}
	if got := cred.Secret.Reveal(); got != sampleSecret+"capo" {
		t.Fatalf("Reveal = %q", got)
	}
	if NewSecret("").String() != emptyValue || !NewSecret("").IsZero() {
		t.Fatalf("an empty secret should print as %s", emptyValue)
	}
}
