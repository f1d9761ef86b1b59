// Package pki makes the throw-away certificate authority and keys of the
// end-to-end control plane: a CA, the API server's serving certificate, the
// admin client certificate, and the service-account signing key.
//
// It exists because the host may have no openssl, and because every run must
// start from fresh credentials. It writes files into one directory and never
// touches anything else; nothing here is fit for a real cluster (keys are
// written unencrypted and the CA lives for a day).
package pki
