package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// crdWaitTimeout bounds waitCRDsEstablished: establishing takes under a second here.
const crdWaitTimeout = 60 * time.Second

// waitCRDsEstablished waits for each CRD's Established condition by reading the CRD
// itself (kubectl get --raw). Not kubectl wait: its name lookup goes through discovery,
// which fails while an aggregated APIService just registered still answers 503 (a CI
// run of up failed so, 3 s after the CRD was applied), and it does not say why.
func (c *Cluster) waitCRDsEstablished(ctx context.Context, names ...string) error {
	ctx, cancel := context.WithTimeout(ctx, crdWaitTimeout)
	defer cancel()
	for _, name := range names {
		var last string
		for {
			out, err := c.kubectl(ctx, "", "get", "--raw", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+name)
			if err == nil {
				var ok bool
				ok, last = crdEstablished([]byte(out))
				if ok {
					break
				}
			} else {
				last = fmt.Sprintf("%v: %s", err, lastLines(strings.TrimSpace(out), 3))
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRD %s not Established after %s: %s", name, crdWaitTimeout, last)
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	return nil
}

// crdEstablished reports whether a CRD (as JSON) is Established and, if not, what its
// conditions say.
func crdEstablished(data []byte) (bool, string) {
	var crd struct {
		Status struct {
			Conditions []struct {
				Type, Status, Reason, Message string
			} `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(data, &crd); err != nil {
		return false, fmt.Sprintf("reading the CRD: %v", err)
	}
	var conds []string
	for _, cond := range crd.Status.Conditions {
		if cond.Type == "Established" && cond.Status == "True" {
			return true, ""
		}
		conds = append(conds, fmt.Sprintf("%s=%s (%s: %s)", cond.Type, cond.Status, cond.Reason, cond.Message))
	}
	if len(conds) == 0 {
		return false, "no conditions yet"
	}
	return false, strings.Join(conds, "; ")
}
