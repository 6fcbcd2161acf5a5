package certs

import (
	"fmt"
	"slices"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
)

// OptionsFromConfig reads magnum.conf's [x509] section (allow_ca, allowed_extensions,
// allowed_key_usage, term_of_validity, rsa_key_size) with Magnum's defaults and choices. Errors
// name the offending key.
func OptionsFromConfig(f *config.File) (GenerateOptions, SignOptions, error) {
	const section = "x509"
	var (
		gen  GenerateOptions
		sign SignOptions
		err  error
	)
	if sign.AllowCA, err = f.Bool(section, "allow_ca", false); err != nil {
		return gen, sign, err
	}
	if sign.ValidityDays, err = f.Int(section, "term_of_validity", DefaultValidityDays, 1, maxValidityDays); err != nil {
		return gen, sign, err
	}
	gen.ValidityDays = sign.ValidityDays
	if gen.RSAKeySize, err = f.Int(section, "rsa_key_size", DefaultRSAKeySize, minRSAKeySize, maxRSAKeySize); err != nil {
		return gen, sign, err
	}
	if sign.AllowedExtensions, err = listOption(f, section, "allowed_extensions", DefaultAllowedExtensions, isKnownExtensionName); err != nil {
		return gen, sign, err
	}
	if sign.AllowedKeyUsage, err = listOption(f, section, "allowed_key_usage", DefaultAllowedKeyUsage,
		func(s string) bool { return slices.Contains(keyUsageNames, s) }); err != nil {
		return gen, sign, err
	}
	return gen, sign, nil
}

// listOption returns the configured list (a set but empty value is an empty, non-nil list, which
// allows nothing) or def, refusing items that valid does not accept, as oslo's choices do.
func listOption(f *config.File, section, key string, def []string, valid func(string) bool) ([]string, error) {
	if _, set := f.Lookup(section, key); !set {
		return slices.Clone(def), nil
	}
	items := f.List(section, key, nil)
	if items == nil {
		items = []string{}
	}
	for _, it := range items {
		if !valid(it) {
			return nil, &config.Error{Section: section, Key: key, Reason: fmt.Sprintf("%q is not a valid choice", it)}
		}
	}
	return items, nil
}
