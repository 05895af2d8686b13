//! The CEL type checker: types, declarations, the standard library, the checker and
//! cel-go compatible error display. Knows nothing about Kubernetes.
