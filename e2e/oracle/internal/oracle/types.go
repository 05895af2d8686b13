// Package oracle runs the real upstream Kubernetes 1.37.1 / cel-go v0.29.2 code paths that
// vapcheck re-implements, so that the Rust checker can be compared against them offline.
package oracle

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

// ParseType parses a CEL type written the way cel-go prints it (checker FormatCELType):
// `int`, `list(string)`, `map(string, dyn)`, `optional_type(int)`, `type(int)`, or a single
// upper-case letter for a type parameter.
func ParseType(s string) (*cel.Type, error) {
	p := &typeParser{src: s}
	t, err := p.parse()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.src) {
		return nil, fmt.Errorf("type %q: unexpected text at offset %d", s, p.pos)
	}
	return t, nil
}

type typeParser struct {
	src string
	pos int
}

func (p *typeParser) skipSpace() {
	for p.pos < len(p.src) && p.src[p.pos] == ' ' {
		p.pos++
	}
}

func (p *typeParser) ident() string {
	p.skipSpace()
	start := p.pos
	for p.pos < len(p.src) {
		c := rune(p.src[p.pos])
		if c == '_' || c == '.' || unicode.IsLetter(c) || unicode.IsDigit(c) {
			p.pos++
			continue
		}
		break
	}
	return p.src[start:p.pos]
}

func (p *typeParser) params() ([]*cel.Type, error) {
	p.skipSpace()
	if p.pos >= len(p.src) || p.src[p.pos] != '(' {
		return nil, nil
	}
	p.pos++
	var out []*cel.Type
	for {
		t, err := p.parse()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		p.skipSpace()
		if p.pos >= len(p.src) {
			return nil, fmt.Errorf("type %q: missing ')'", p.src)
		}
		switch p.src[p.pos] {
		case ',':
			p.pos++
		case ')':
			p.pos++
			return out, nil
		default:
			return nil, fmt.Errorf("type %q: unexpected %q at offset %d", p.src, p.src[p.pos], p.pos)
		}
	}
}

func (p *typeParser) parse() (*cel.Type, error) {
	name := p.ident()
	if name == "" {
		return nil, fmt.Errorf("type %q: expected a type name at offset %d", p.src, p.pos)
	}
	params, err := p.params()
	if err != nil {
		return nil, err
	}
	want := func(n int) error {
		if len(params) != n {
			return fmt.Errorf("type %q: %s takes %d parameter(s), got %d", p.src, name, n, len(params))
		}
		return nil
	}
	simple := map[string]*cel.Type{
		"int": cel.IntType, "uint": cel.UintType, "double": cel.DoubleType, "bool": cel.BoolType,
		"string": cel.StringType, "bytes": cel.BytesType, "dyn": cel.DynType, "any": cel.AnyType,
		"null": cel.NullType, "null_type": cel.NullType, "timestamp": cel.TimestampType,
		"duration": cel.DurationType, "google.protobuf.Timestamp": cel.TimestampType,
		"google.protobuf.Duration": cel.DurationType,
	}
	if t, ok := simple[name]; ok {
		return t, want(0)
	}
	switch name {
	case "list":
		if err := want(1); err != nil {
			return nil, err
		}
		return cel.ListType(params[0]), nil
	case "map":
		if err := want(2); err != nil {
			return nil, err
		}
		return cel.MapType(params[0], params[1]), nil
	case "optional_type", "optional":
		if err := want(1); err != nil {
			return nil, err
		}
		return cel.OptionalType(params[0]), nil
	case "type":
		if err := want(1); err != nil {
			return nil, err
		}
		return types.NewTypeTypeWithParam(params[0]), nil
	case "wrapper":
		if err := want(1); err != nil {
			return nil, err
		}
		return types.NewNullableType(params[0]), nil
	}
	if len(name) == 1 && strings.ToUpper(name) == name && len(params) == 0 {
		return cel.TypeParamType(name), nil
	}
	return nil, fmt.Errorf("type %q: unknown type name %q", p.src, name)
}
