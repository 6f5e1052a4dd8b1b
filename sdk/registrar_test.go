package sdk_test

import "google.golang.org/grpc"

// nopRegistrar accepts registrations and serves nothing.
type nopRegistrar struct{}

func (nopRegistrar) RegisterService(*grpc.ServiceDesc, any) {}
