package discovery

import (
	"bytes"
	"fmt"
	"os"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ValidateDocument checks a served document against the JSON Schema file (docs/managed-kubernetes.schema.json),
// formats included. Tests use it, locally and against the running bridge.
func ValidateDocument(body []byte, schemaFile string) error {
	raw, err := os.ReadFile(schemaFile)
	if err != nil {
		return err
	}
	schemaDoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("%s: %w", schemaFile, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.AssertContent()
	if err := c.AddResource("managed-kubernetes.schema.json", schemaDoc); err != nil {
		return err
	}
	schema, err := c.Compile("managed-kubernetes.schema.json")
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("the document is not JSON: %w", err)
	}
	return schema.Validate(doc)
}
