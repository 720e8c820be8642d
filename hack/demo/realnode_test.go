package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The real worker pods get the backend's variables, its password files from the Secret.
func TestBackendSecretAndPodSpec(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	admin := filepath.Join(dir, "admin-password")
	if err := os.WriteFile(admin, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"METRICSCALE_REDIS_ADDR":                "192.0.2.2:16379",
		"METRICSCALE_REDIS_ADMIN_PASSWORD_FILE": admin,
		"METRICSCALE_NATS_URL":                  "nats://127.0.0.1:14222",
		"KUBECONFIG":                            "/x",
	}
	s, vars, err := backendSecret(env, "redis")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(s.Data["admin-password-file"]); got != "s3cret" || len(s.Data) != 1 {
		t.Errorf("Secret data %v, want only admin-password-file = the file's content", s.Data)
	}
	var got []string
	for _, v := range vars {
		got = append(got, v.Name+"="+v.Value)
	}
	want := []string{"METRICSCALE_REDIS_ADDR=192.0.2.2:16379", "METRICSCALE_REDIS_ADMIN_PASSWORD_FILE=" + secretDir + "/admin-password-file"}
	if !slices.Equal(got, want) {
		t.Errorf("pod env %v, want %v", got, want)
	}
	if _, _, err := backendSecret(map[string]string{"METRICSCALE_REDIS_PASSWORD_FILE": filepath.Join(dir, "missing")}, "redis"); err == nil {
		t.Error("a missing password file: no error")
	}

	r := &realWorkers{ref: "ghcr.io/metricscale/worker:v9", node: "metricscale-node"}
	spec := r.podSpec("redis", vars)
	c := spec.Containers[0]
	if c.Image != r.ref || c.ImagePullPolicy != "Never" || spec.NodeSelector["kubernetes.io/hostname"] != "metricscale-node" {
		t.Errorf("image %s pull %s node %v", c.Image, c.ImagePullPolicy, spec.NodeSelector)
	}
	names := map[string]string{}
	for _, e := range c.Env {
		names[e.Name] = e.Value
	}
	if names["METRICSCALE_WORKER_JOB_TIME"] != (time.Second / drainRate).String() || names["METRICSCALE_REDIS_ADDR"] != "192.0.2.2:16379" {
		t.Errorf("container env %v", names)
	}
}
