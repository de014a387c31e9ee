package check

import (
	"fmt"
	"strings"

	verrors "github.com/pb33f/libopenapi-validator/errors"
)

// schemaErrors renders the schema findings of a validation error.
func schemaErrors(e *verrors.ValidationError) string {
	var b strings.Builder
	for _, s := range e.SchemaValidationErrors {
		fmt.Fprintf(&b, "\n    %s: %s", s.FieldPath, s.Reason)
	}
	return b.String()
}
