package codec_test

import "fmt"

// fmtValue renders a parsed value with its Go type, so 1 and "1" differ.
func fmtValue(v any) string { return fmt.Sprintf("%T(%v)", v, v) }
