package state

import (
	"fmt"
	"reflect"
)

func typeName[T any]() string { return reflect.TypeFor[T]().String() }

// stateKind is the kind of a registered state. The numbers are part of the
// snapshot stream format: never renumber them.
type stateKind uint8

const (
	kindValue stateKind = 1
	kindList  stateKind = 2
	kindMap   stateKind = 3
)

func (k stateKind) String() string {
	switch k {
	case kindValue:
		return "value"
	case kindList:
		return "list"
	case kindMap:
		return "map"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}
