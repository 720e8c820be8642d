// Package options is what every provider's config options share: strict
// decoding whose errors name the path of each bad field (all of them, not
// just the first), secrets read from a file or an environment variable
// (never written in the config), TLS settings, HTTP headers whose
// credentials come from a secret, and redaction, so that a secret's value
// never appears in an error, a log line or a printed config.
//
// A provider package uses it the same way whatever its backend:
//
//	// Options are the provider's config options (providers[].options).
//	type Options struct{ ... Password *options.Secret `json:"password"` ... }
//
//	// decodeOptions decodes raw strictly and validates it; every error
//	// names its field below field ("providers[0].options").
//	func decodeOptions(field string, raw json.RawMessage) (*settings, error)
//
// where settings are the Options validated, with defaults applied. The
// provider's Factory.Validate and Factory.New both call decodeOptions.
package options
