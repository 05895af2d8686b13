//! OpenAPI v3 schemas to CEL types, and the sources that supply schemas.
