package wasm
