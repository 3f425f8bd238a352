package api

import _ "embed"

// openapiJSON is the OpenAPI 3 description served at /openapi.json. It is
// written by hand; openapi_test.go checks that it documents exactly the
// routes, methods and parameters of the handler table, and that the
// answers of the handlers match its response schemas.
//
//go:embed openapi.json
var openapiJSON []byte
