package rabbitmq

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/metricscale/metricscale/providers/backendhttp"
)

// queueStats is one queue as the management API lists it. A nil count is
// one the API did not report (stats not collected yet, queue down).
type queueStats struct {
	Name        string      `json:"name"`
	Vhost       string      `json:"vhost"`
	Ready       *float64    `json:"messages_ready"`
	Unacked     *float64    `json:"messages_unacknowledged"`
	Consumers   *float64    `json:"consumers"`
	MessageStat messageStat `json:"message_stats"`
}

type messageStat struct {
	Publish    rateDetails `json:"publish_details"`
	DeliverGet rateDetails `json:"deliver_get_details"`
}

type rateDetails struct {
	Rate *float64 `json:"rate"`
}

// managementAPI is the seam the management metrics read through.
type managementAPI interface {
	// Queues lists the queues of vhost.
	Queues(ctx context.Context, vhost string) ([]queueStats, error)
}

// queueColumns keep the answer to what the metrics use: a full queue
// object is ~2 KB, this is ~200 bytes.
const queueColumns = "name,vhost,messages_ready,messages_unacknowledged,consumers," +
	"message_stats.publish_details.rate,message_stats.deliver_get_details.rate"

// maxBody bounds an answer (a broker with 100k queues answers ~20 MB).
const maxBody = 64 << 20

// httpManagement is managementAPI over HTTP.
type httpManagement struct {
	base     *url.URL
	username string
	password func() (string, error)
	client   *http.Client
}

func newHTTPManagement(base *url.URL, username string, password func() (string, error), tlsConfig *tls.Config) *httpManagement {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}
	// no client timeout: every request carries the query's deadline; no
	// redirect followed: the password goes to the configured URL only
	return &httpManagement{base: base, username: username, password: password, client: backendhttp.NewClient(tr)}
}

func (m *httpManagement) queuesURL(vhost string) string {
	u := *m.base
	prefix := strings.TrimRight(m.base.EscapedPath(), "/")
	u.Path = strings.TrimRight(m.base.Path, "/") + "/api/queues/" + vhost
	u.RawPath = prefix + "/api/queues/" + url.PathEscape(vhost)
	u.RawQuery = url.Values{"columns": {queueColumns}}.Encode()
	return u.String()
}

// Queues implements managementAPI.
func (m *httpManagement) Queues(ctx context.Context, vhost string) ([]queueStats, error) {
	pw, err := m.password()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.queuesURL(vhost), nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(m.username, pw)
	req.Header.Set("Accept", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		// the cause without the request URL's long query
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("management API at %s: %w", m.base.Redacted(), err)
	}
	defer resp.Body.Close()
	if backendhttp.IsRedirect(resp.StatusCode) {
		return nil, fmt.Errorf("management API: %s: %s: set options.management to the URL the broker serves", statusOf(resp), backendhttp.Redirect(resp))
	}
	body, err := backendhttp.ReadBody(resp, maxBody)
	switch {
	case backendhttp.IsTooLarge(err):
		return nil, fmt.Errorf("management API: the queues of vhost %q: %w", vhost, err)
	case err != nil:
		return nil, fmt.Errorf("management API: reading the queues of vhost %q: %w", vhost, err)
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("management API: %s: user %q was refused (check options.username, options.password and the user's tags)", statusOf(resp), m.username)
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("management API: %s for vhost %q: no such vhost, or the management plugin is not at %s", statusOf(resp), vhost, m.base.Redacted())
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("management API: %s: %s", statusOf(resp), backendhttp.Excerpt(body))
	}
	var qs []queueStats
	if err := json.Unmarshal(body, &qs); err != nil {
		return nil, fmt.Errorf("management API: decoding the queues of vhost %q: %w", vhost, err)
	}
	return qs, nil
}

// statusOf is the answer's code and its standard text: the reason phrase
// the broker sent is its own text, not shown.
func statusOf(resp *http.Response) string {
	return fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
}

func (m *httpManagement) close() { m.client.CloseIdleConnections() }
