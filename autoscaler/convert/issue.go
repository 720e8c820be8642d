package convert

import "fmt"

// Issue is something of a source object that did not convert, or not
// exactly: the object, the field and why.
type Issue struct {
	// Object is "ScaledObject shop/orders".
	Object string
	// Field is the source field's path ("spec.triggers[1].authenticationRef").
	Field string
	// Reason says what was done instead, or what to do.
	Reason string
	// Fatal: the object was not converted at all.
	Fatal bool
}

func (i Issue) String() string {
	what := "not converted"
	if !i.Fatal {
		what = "converted with a change"
	}
	if i.Field == "" {
		return fmt.Sprintf("%s: %s: %s", i.Object, what, i.Reason)
	}
	return fmt.Sprintf("%s: %s: %s: %s", i.Object, what, i.Field, i.Reason)
}
