package state

import "reflect"

func typeName[T any]() string { return reflect.TypeFor[T]().String() }
