// Package gopclntab reads a Go binary's .gopclntab (function table, file and
// line tables, inline trees, SP-delta tables) without relying on the symbol
// table or DWARF, so stripped binaries symbolize fully.
package gopclntab
