package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
)

// Object is one object of an input: a document of a file, an item of a
// List, or an object read from the cluster.
type Object struct {
	// Where says where it came from, for errors ("hpa.yaml: document 2").
	Where      string
	APIVersion string
	Kind       string
	// JSON is the object, as JSON.
	JSON []byte
}

// Describe names the object for messages: "HorizontalPodAutoscaler shop/web".
func (o Object) Describe() string {
	var meta struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(o.JSON, &meta)
	name := meta.Metadata.Name
	if meta.Metadata.Namespace != "" {
		name = meta.Metadata.Namespace + "/" + name
	}
	return strings.TrimSpace(o.Kind + " " + name)
}

// ReadObjects splits a YAML or JSON input into its objects: several YAML
// documents, a JSON stream, and the items of Lists (kubectl get -o yaml).
// where names the input in errors.
func ReadObjects(where string, data []byte) ([]Object, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []Object
	for n := 1; ; n++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", where, n, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
			continue
		}
		objs, err := splitList(fmt.Sprintf("%s: document %d", where, n), raw, "", "")
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// splitList returns the object in raw, or the items of a List; items of a
// typed list (HorizontalPodAutoscalerList) may leave apiVersion and kind
// out, and take them from the list.
func splitList(where string, raw []byte, apiVersion, kind string) ([]Object, error) {
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("%s: not an object: %w", where, err)
	}
	if head.APIVersion == "" {
		head.APIVersion = apiVersion
	}
	if head.Kind == "" {
		head.Kind = kind
	}
	if strings.HasSuffix(head.Kind, "List") {
		itemKind := ""
		if head.Kind != "List" {
			itemKind = strings.TrimSuffix(head.Kind, "List")
		}
		var out []Object
		for i, item := range head.Items {
			objs, err := splitList(fmt.Sprintf("%s: items[%d]", where, i), item, head.APIVersion, itemKind)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
		return out, nil
	}
	switch {
	case head.APIVersion == "":
		return nil, fmt.Errorf("%s: apiVersion: required", where)
	case head.Kind == "":
		return nil, fmt.Errorf("%s: kind: required", where)
	}
	if apiVersion != "" || kind != "" {
		// an item that inherited them: write them into its JSON
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		m["apiVersion"], m["kind"] = head.APIVersion, head.Kind
		var err error
		if raw, err = json.Marshal(m); err != nil {
			return nil, err
		}
	}
	return []Object{{Where: where, APIVersion: head.APIVersion, Kind: head.Kind, JSON: raw}}, nil
}

// decodeStrict decodes an object's JSON into out; an unknown or duplicate
// field is an error naming its path ("unknown field \"spec.metricz\"").
func decodeStrict(data []byte, out any) error {
	strict, err := kjson.UnmarshalStrict(data, out)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}
