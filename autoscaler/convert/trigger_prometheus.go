package convert

import (
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// prometheusMeta is what a prometheus trigger's metadata says.
type prometheusMeta struct {
	ServerAddress       string             `keda:"serverAddress,required,env"`
	Query               string             `keda:"query,required,env"`
	Threshold           *resource.Quantity `keda:"threshold,threshold"`
	ActivationThreshold *resource.Quantity `keda:"activationThreshold"`
	Namespace           string             `keda:"namespace"`
	QueryParameters     string             `keda:"queryParameters"`
	AWSRegion           string             `keda:"awsRegion"`
	CustomHeaders       string             `keda:"customHeaders"`
	CortexOrgID         string             `keda:"cortexOrgID"`
	UnsafeSSL           bool               `keda:"unsafeSsl"`
	AuthModes           string             `keda:"authModes"`
	IgnoreNullValues    bool               `keda:"ignoreNullValues,default=true"`
}

// prometheus: an external rule whose query is the trigger's, served by a
// prometheus provider per server. The rule is discovered through the `up`
// series, which every scraping Prometheus has, so that the metric exists
// whether or not the query's own series do; with ignoreNullValues (KEDA's
// default) an empty answer is 0, as KEDA reads it.
func (c *soConverter) prometheus(d *meta, _ *KEDATrigger) *external {
	var m prometheusMeta
	if !d.decode(&m) {
		return nil
	}
	d.ignore("timeout")
	u, err := url.Parse(m.ServerAddress)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		if strings.Contains(m.ServerAddress, "@") {
			d.fail("serverAddress", "not an http or https URL") // not quoted: it may hold a password
			return nil
		}
		d.fail("serverAddress", "%q is not an http or https URL", m.ServerAddress)
		return nil
	}
	if u.User != nil {
		d.fail("serverAddress", "credentials in the URL are not copied: give them through the provider's options")
		return nil
	}
	if strings.Contains(m.Query, "<<") || strings.Contains(m.Query, ">>") {
		d.fail("query", "contains << or >>, the delimiters of the adapter's query templates")
		return nil
	}
	if m.Namespace != "" {
		d.fail("namespace", "the namespace query parameter (Thanos, Cortex tenancy) has no equivalent in the prometheus provider")
	}
	if m.QueryParameters != "" {
		d.fail("queryParameters", "no equivalent in the prometheus provider")
	}
	if m.AWSRegion != "" {
		d.fail("awsRegion", "Amazon Managed Prometheus (SigV4) is not supported by the prometheus provider")
	}
	conn := map[string]any{"url": strings.TrimRight(m.ServerAddress, "/")}
	headers := map[string]any{}
	if h := m.CustomHeaders; h != "" {
		for _, kv := range strings.Split(h, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) == "" {
				d.fail("customHeaders", "%q: want key=value,key=value", h)
				return nil
			}
			headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if m.CortexOrgID != "" {
		headers["X-Scope-OrgID"] = m.CortexOrgID
	}
	if len(headers) > 0 {
		conn["headers"] = headers
	}
	if m.UnsafeSSL && u.Scheme == "https" {
		conn["insecureSkipTLSVerify"] = true
	}
	authRef := false
	// one folder per server: the credentials are part of what makes a provider
	dir := c.b.credDir + "/prometheus-" + strings.Trim(nonName.ReplaceAllString(strings.ToLower(u.Host), "-"), "-")
	if m.AuthModes != "" {
		for _, mode := range strings.Split(m.AuthModes, ",") {
			switch mode = strings.TrimSpace(mode); mode {
			case "bearer":
				conn["bearerTokenFile"] = dir + "/token"
				d.warn("authModes", "bearer: the token is not copied: mount it at %s (providers[].options.bearerTokenFile)", conn["bearerTokenFile"])
			case "basic":
				conn["username"] = "REPLACE-WITH-USERNAME"
				conn["passwordFile"] = dir + "/password"
				d.warn("authModes", "basic: the credentials are not copied: set providers[].options.username and mount the password at %s", conn["passwordFile"])
			case "tls":
				conn["certFile"] = dir + "/tls.crt"
				conn["keyFile"] = dir + "/tls.key"
				d.warn("authModes", "tls: the client certificate is not copied: mount it at %s and %s (and a CA at caFile if needed)", conn["certFile"], conn["keyFile"])
			default:
				d.fail("authModes", "%q: no equivalent in the prometheus provider", mode)
				return nil
			}
		}
		authRef = true
		// said above for each mode
		d.markAuthRead("bearerToken", "username", "password", "ca", "cert", "key")
	}
	metricsQuery := m.Query
	if m.IgnoreNullValues {
		metricsQuery = "(" + m.Query + ") or vector(0)"
	}
	return &external{provider: "prometheus", listKey: "externalRules", conn: conn, target: m.Threshold, activ: m.ActivationThreshold, authRef: authRef,
		entry: func(name string) any {
			return map[string]any{
				"seriesQuery":  "up",
				"resources":    map[string]any{"namespaced": false},
				"name":         map[string]any{"matches": "^up$", "as": name},
				"metricsQuery": metricsQuery,
			}
		}}
}
