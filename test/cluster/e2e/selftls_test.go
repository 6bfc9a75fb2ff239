package e2e

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	selfSecret  = "draguard-tls" // <fullname>-tls
	webhookName = "draguard"     // both webhook configurations
	releaseNS   = "draguard"
)

// pemBlocks are the certificates of a PEM bundle, in order.
func pemBlocks(t *testing.T, bundle []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for rest := bundle; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return out
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("a certificate of the bundle does not parse: %v", err)
		}
		out = append(out, c)
	}
}

// bundlesAre is nil when every webhook of both configurations carries exactly `bundle`.
func bundlesAre(ctx context.Context, c *Cluster, bundle []byte) error {
	adm := c.Kube.AdmissionregistrationV1()
	v, err := adm.ValidatingWebhookConfigurations().Get(ctx, webhookName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	m, err := adm.MutatingWebhookConfigurations().Get(ctx, webhookName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var got [][]byte
	for _, w := range v.Webhooks {
		got = append(got, w.ClientConfig.CABundle)
	}
	for _, w := range m.Webhooks {
		got = append(got, w.ClientConfig.CABundle)
	}
	for i, b := range got {
		if !bytes.Equal(b, bundle) {
			return fmt.Errorf("webhook %d of %d has a caBundle of %d bytes, the Secret's is %d", i, len(got), len(b), len(bundle))
		}
	}
	return nil
}

// TestSelfManagedTLS: tls.mode=self through the real apiserver. Two replicas with the chart's
// ServiceAccount keep one Secret and the caBundle of both webhook configurations; the
// apiserver's calls (failurePolicy Fail) verify against it while a steady stream of Pod creates
// runs and the Secret is deleted, a caBundle stripped and the CA rotated: no create may fail.
func TestSelfManagedTLS(t *testing.T) {
	ctx := context.Background()
	c := Up(t, g4dn)
	lb := newBalancer(t)
	c.Install("--set", "tls.mode=self", "--set", "tls.self.extraSANs={127.0.0.1}",
		"--set", "tls.self.resyncSeconds=2", "--set", "webhook.url=https://127.0.0.1:"+strconv.Itoa(lb.port()),
		"--set", "validating.failurePolicy=Fail", "--set", "mutation.failurePolicy=Fail")
	c.WaitServiceAccount("default")
	secrets := c.Kube.CoreV1().Secrets(releaseNS)

	// The first start created the Secret and wrote its CA into both configurations.
	first, err := secrets.Get(ctx, selfSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the first start made no Secret %s: %v", selfSecret, err)
	}
	ca := first.Data["ca.crt"]
	if n := len(pemBlocks(t, ca)); n != 1 {
		t.Fatalf("a new Secret's bundle has %d certificates", n)
	}
	Eventually(t, 20*time.Second, "caBundle injected", func() error { return bundlesAre(ctx, c, ca) })

	replicas := startReplicas(t, c, lb, 2)
	l := startLoad(t, c, 40)
	l.waitSent(t, 60)
	// Both replicas converged on the Secret instead of making their own.
	for _, r := range replicas {
		select {
		case <-r.done:
			t.Fatalf("replica on %d exited", r.port)
		default:
		}
	}
	if got, err := secrets.Get(ctx, selfSecret, metav1.GetOptions{}); err != nil || !bytes.Equal(got.Data["ca.crt"], ca) {
		t.Fatalf("the replicas replaced the Secret's CA (err %v)", err)
	}

	// A deleted Secret is recreated with the CA in service within the resync.
	if err := secrets.Delete(ctx, selfSecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	Eventually(t, 20*time.Second, "Secret recreated", func() error {
		got, err := secrets.Get(ctx, selfSecret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !bytes.Equal(got.Data["ca.crt"], ca) {
			return fmt.Errorf("recreated with another CA")
		}
		return nil
	})
	t.Logf("Secret recreated %v after its deletion", time.Since(deleted).Round(time.Millisecond))
	l.waitSent(t, 40)
	l.finish(t, "Secret deleted and recreated")

	// A stripped caBundle (no load: until it is back the apiserver has no CA to verify with) is written back within the resync.
	adm := c.Kube.AdmissionregistrationV1()
	v, err := adm.ValidatingWebhookConfigurations().Get(ctx, webhookName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v.Webhooks[len(v.Webhooks)-1].ClientConfig.CABundle = nil
	if _, err := adm.ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stripped := time.Now()
	Eventually(t, 20*time.Second, "caBundle re-injected", func() error { return bundlesAre(ctx, c, ca) })
	t.Logf("caBundle re-injected %v after it was stripped", time.Since(stripped).Round(time.Millisecond))

	// Forced CA rotation: the CA in service is re-issued by the test, same key and subject, as
	// one past 2/3 of its life. The replicas must rotate: a new CA first in the bundle, the old one
	// kept, the serving certificate unchanged until the new bundle has propagated.
	l = startLoad(t, c, 40)
	sec, err := secrets.Get(ctx, selfSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := pemBlocks(t, sec.Data["ca.crt"])[0]
	keyBlock, _ := pem.Decode(sec.Data["ca.key"])
	if keyBlock == nil {
		t.Fatal("ca.key is not PEM")
	}
	key, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := *old
	tmpl.NotBefore = time.Now().Add(-200 * 24 * time.Hour)
	tmpl.NotAfter = time.Now().Add(10 * 24 * time.Hour)
	redated, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, old.PublicKey, key.(crypto.Signer))
	if err != nil {
		t.Fatal(err)
	}
	sec.Data["ca.crt"] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: redated})
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rotated := time.Now()
	var bundle []byte
	Eventually(t, 30*time.Second, "CA rotated", func() error {
		got, err := secrets.Get(ctx, selfSecret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		certs := pemBlocks(t, got.Data["ca.crt"])
		if len(certs) != 2 || !certs[1].Equal(mustParse(t, redated)) {
			return fmt.Errorf("bundle of %d certificates", len(certs))
		}
		if !bytes.Equal(got.Data["tls.crt"], sec.Data["tls.crt"]) {
			return fmt.Errorf("the serving certificate changed before the new bundle propagated")
		}
		bundle = got.Data["ca.crt"]
		return nil
	})
	Eventually(t, 20*time.Second, "rotated bundle injected", func() error { return bundlesAre(ctx, c, bundle) })
	t.Logf("CA rotated and injected %v after it became due", time.Since(rotated).Round(time.Millisecond))
	l.waitSent(t, 80)
	l.finish(t, "CA rotation")
}

func mustParse(t *testing.T, der []byte) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
