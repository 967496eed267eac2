// Package context stands in for golang.org/x/net/context, which today is the standard library's.
package context

import "context"

type Context = context.Context
