package certs

import (
	"slices"
	"testing"
	"time"
)

// reportPercentiles adds p50/p99 latencies (ms) to a benchmark's output.
func reportPercentiles(b *testing.B, samples []time.Duration) {
	b.Helper()
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	at := func(q float64) float64 {
		return float64(samples[int(q*float64(len(samples)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

func benchmarkSign(b *testing.B, csrPEM string) {
	ca := clusterPKI(b).KubernetesCA.Stored
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		if _, err := Sign(ca, "k8s-demo", csrPEM, SignOptions{}); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
	}
	reportPercentiles(b, samples)
}

// BenchmarkSign is one sign_certificate for `openstack coe cluster config` (RSA 2048 CSR):
// CSR parse + signature check, CA key decryption (PBKDF2, 2048 iterations), RSA-2048 signature.
func BenchmarkSign(b *testing.B) {
	csr, _ := magnumclientCSR(b)
	benchmarkSign(b, csr)
}

// BenchmarkSignTerraform is the same with Terraform's RSA-4096/SHA-512 CSR, sent on every refresh.
func BenchmarkSignTerraform(b *testing.B) {
	csr, _ := terraformCSR(b)
	benchmarkSign(b, csr)
}

// BenchmarkGenerateCluster is cluster_create's certificate work: four RSA-2048 keys (generated
// concurrently), three CAs, the client certificate and four key encryptions.
func BenchmarkGenerateCluster(b *testing.B) {
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		if _, err := GenerateCluster("bench"); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
	}
	reportPercentiles(b, samples)
}
