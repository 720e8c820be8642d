package catalog

import (
	"slices"
	"testing"
)

func TestTypes(t *testing.T) {
	t.Parallel()
	if got, want := Types(), []string{"apiservice", "kafka", "memory", "nats", "postgresql", "prometheus", "rabbitmq", "redis"}; !slices.Equal(got, want) {
		t.Errorf("Types() = %v, want %v", got, want)
	}
}
