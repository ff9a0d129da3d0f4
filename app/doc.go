// Package app is the composition root of `rl-exporter serve`: Build turns a
// config into the running parts (the store and its guard, the compiled policy,
// the HTTP listeners of package server, the gRPC listener, regions, live limits,
// the heartbeat and the watchers), Built.Reload swaps a new policy in, and
// Built.Serve runs every part under one group and stops them in order.
//
// It is the one package that knows every other: server serves HTTP, proxy
// forwards, httplimit decides per request, limiter and its stores count, and
// nothing below app wires them.
package app
