package resourcemetrics

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// selectors returns the list's label and field selectors (everything when
// unset). Fields other than metadata.name and metadata.namespace are a 400:
// the caches hold metadata only, so nothing else could ever match.
func selectors(opts *metainternalversion.ListOptions, namespaced bool) (labels.Selector, fields.Selector, error) {
	lsel, fsel := labels.Everything(), fields.Everything()
	if opts == nil {
		return lsel, fsel, nil
	}
	if opts.LabelSelector != nil {
		lsel = opts.LabelSelector
	}
	if opts.FieldSelector != nil {
		fsel = opts.FieldSelector
		for _, r := range fsel.Requirements() {
			switch {
			case r.Field == "metadata.name":
			case r.Field == "metadata.namespace" && namespaced:
			default:
				supported := "metadata.name"
				if namespaced {
					supported += ", metadata.namespace"
				}
				return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %q (supported: %s)", r.Field, supported))
			}
		}
	}
	return lsel, fsel, nil
}

// fieldsMatch reports whether m's name and namespace match fsel.
func fieldsMatch(fsel fields.Selector, m *metav1.PartialObjectMetadata) bool {
	if fsel.Empty() {
		return true
	}
	return fsel.Matches(fields.Set{"metadata.name": m.Name, "metadata.namespace": m.Namespace})
}
