//! The Kubernetes CEL environment: extension libraries, Kubernetes libraries and the
//! admission variables of ValidatingAdmissionPolicy expressions.
