//go:build e2e

package e2e

import (
	"context"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rabbitmqBackend is the local RabbitMQ of hack/backends/rabbitmq.sh: the e2e queue is the
// durable queue e2e-jobs on vhost /, whose ready + unacknowledged messages the adapter
// serves as rabbitmq_e2e_jobs_total (hack/backends/rabbitmq.yaml). The hooks publish and
// purge as the e2e user, whose password file the script writes; count asks rabbitmqctl,
// which reads the queue itself (not the management statistics the adapter reads).
func rabbitmqBackend() queueBackend {
	const queue = "e2e-jobs"
	rabbitEnv := backendEnv("rabbitmq")
	// channel dials as the e2e user and declares the queue as the script does.
	channel := func(t *testing.T) (*amqp.Connection, *amqp.Channel) {
		t.Helper()
		e := rabbitEnv(t)
		pw := secretFile(t, e["METRICSCALE_RABBITMQ_E2E_PASSWORD_FILE"], "the e2e user's password (hack/backends/rabbitmq.sh start)")
		u, err := url.Parse(e["METRICSCALE_RABBITMQ_AMQP_URL"])
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(e["METRICSCALE_RABBITMQ_E2E_USER"], pw)
		conn, err := amqp.Dial(u.String())
		if err != nil {
			// amqp091's errors do not carry the URL
			t.Fatalf("connecting to RabbitMQ at %s: %v", e["METRICSCALE_RABBITMQ_AMQP_URL"], err)
		}
		ch, err := conn.Channel()
		if err == nil {
			_, err = ch.QueueDeclare(queue, true, false, false, false, nil)
		}
		if err != nil {
			conn.Close()
			t.Fatalf("declaring queue %s: %v", queue, err)
		}
		return conn, ch
	}
	return queueBackend{
		name:     "rabbitmq",
		metric:   "rabbitmq_e2e_jobs_total",
		selector: map[string]string{"queue": queue},
		publish: func(ctx context.Context, t *testing.T, n int) {
			t.Helper()
			conn, ch := channel(t)
			defer conn.Close()
			// confirms: every message is in the queue when publish returns
			if err := ch.Confirm(false); err != nil {
				t.Fatalf("confirm mode: %v", err)
			}
			for i := 0; i < n; i++ {
				dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp.Publishing{
					DeliveryMode: amqp.Persistent, ContentType: "text/plain", Body: []byte("job-" + strconv.Itoa(i)),
				})
				if err != nil {
					t.Fatalf("publishing to %s (%d of %d): %v", queue, i+1, n, err)
				}
				if ok, err := dc.WaitContext(ctx); err != nil || !ok {
					t.Fatalf("publishing to %s (%d of %d): not confirmed (%v)", queue, i+1, n, err)
				}
			}
		},
		// purges ready messages; unacknowledged ones go when their consumers ack or leave
		drain: func(ctx context.Context, t *testing.T) {
			t.Helper()
			conn, ch := channel(t)
			defer conn.Close()
			if _, err := ch.QueuePurge(queue, false); err != nil {
				t.Fatalf("purging %s: %v", queue, err)
			}
		},
		// rabbitmqctl list_queues: ready + unacknowledged, as the metric counts
		count: func(ctx context.Context, t *testing.T) int {
			t.Helper()
			e := rabbitEnv(t)
			cmd := exec.CommandContext(ctx, "bash", filepath.Join(cluster.RepoRoot, "hack", "backends", "rabbitmq.sh"), "ctl",
				filepath.Dir(e["METRICSCALE_RABBITMQ_DIR"]), "-q", "list_queues", "-p", "/", "name", "messages_ready", "messages_unacknowledged")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("rabbitmqctl list_queues: %v: %s", err, out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(line)
				if len(f) != 3 || f[0] != queue {
					continue
				}
				ready, err1 := strconv.Atoi(f[1])
				unacked, err2 := strconv.Atoi(f[2])
				if err1 != nil || err2 != nil {
					t.Fatalf("rabbitmqctl list_queues printed %q", line)
				}
				return ready + unacked
			}
			t.Fatalf("rabbitmqctl list_queues does not list %s:\n%s", queue, out)
			return 0
		},
	}
}
