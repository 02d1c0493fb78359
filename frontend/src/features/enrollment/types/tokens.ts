// Enrolment-token payloads, from the OpenAPI schema.
import type { Schemas } from "@/shared/api/types";

export type EnrollmentToken = Schemas["EnrollmentToken"];
/** The create response: the key (and the install command holding it) is shown once, never again. */
export type EnrollmentTokenCreated = Schemas["EnrollmentTokenCreated"];
export type EnrollmentTokenInput = Schemas["EnrollmentTokenRequest"];
