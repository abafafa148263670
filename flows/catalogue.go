package flows
