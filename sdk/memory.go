package sdk

import (
	"context"
	"errors"

	"github.com/agentkernel/agentkernel/sdk/pluginpb"
)

// MemoryProvider is a plugin's memory index (docs/memory.md, "Plugin
// interface"): the kernel calls Index with a memory.Index method's name
// (add, search_text, search_vector, mark, pending, delete_session, status,
// close) and its arguments as JSON, and reads the result as JSON. The SDK
// does not link the kernel, so it passes the documents through; a provider
// decodes them into its own types (the JSON of memory.Chunk, Scope, Hit,
// Batch, Status). An error that is an *Error keeps its code (scope,
// dimension, bad_vector, closed, invalid: the host maps them to memory's
// errors); any other is code "provider_error".
type MemoryProvider interface {
	Index(ctx context.Context, method string, args []byte) ([]byte, error)
}

// memoryService serves pluginpb.MemoryServer over a provider.
type memoryService struct {
	pluginpb.UnimplementedMemoryServer
	p MemoryProvider
}

func (s *memoryService) Index(ctx context.Context, req *pluginpb.IndexRequest) (resp *pluginpb.IndexResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = &pluginpb.IndexResponse{Error: &pluginpb.Error{Code: "panic", Message: "memory provider panicked"}}, nil
		}
	}()
	out, err := s.p.Index(ctx, req.GetMethod(), req.GetArgs())
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return &pluginpb.IndexResponse{Error: &pluginpb.Error{Code: e.Code, Message: e.Message}}, nil
		}
		return &pluginpb.IndexResponse{Error: &pluginpb.Error{Code: "provider_error", Message: err.Error()}}, nil
	}
	return &pluginpb.IndexResponse{Result: out}, nil
}
