package templates

// Test helpers of the internal tests, for the external test package (templates_test).
var (
	UpdateGolden = update
	GoldenYAML   = goldenYAML
	CheckGolden  = checkGolden
)
