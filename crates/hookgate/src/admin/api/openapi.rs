//! The OpenAPI 3.1 document of the operator API, generated from the handlers' annotations
//! and the answer types (`utoipa`), served at `/openapi.json` without a token.

use axum::Json;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::error::ErrorBody;
use super::types::{
    Attempts, AuditEntry, AuditPage, Delivery, EventDetail, EventPage, EventSummary, OperationDone,
    Payload, ReplayRequest,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "hookgate operator API",
        description = "Events, payloads (scope decrypt), retry / replay / re-delivery (scope operate) and the audit log. Every route needs Authorization: Bearer <token>; errors are {\"error\": code}."
    ),
    paths(
        super::events::list,
        super::events::show,
        super::events::payload,
        super::events::retry,
        super::events::replay,
        super::audit::list,
        super::jobs::create,
        super::jobs::list,
        super::jobs::show,
        super::jobs::pause,
        super::jobs::resume,
        super::jobs::cancel,
        super::rejections::list,
    ),
    components(schemas(
        ErrorBody, EventSummary, EventPage, Attempts, Delivery, EventDetail, Payload,
        ReplayRequest, OperationDone, AuditEntry, AuditPage,
        super::jobs::JobRequest, super::jobs::JobCreated, super::jobs::JobProgress,
        super::jobs::Job, super::jobs::JobPage,
        super::rejections::Rejection, super::rejections::RejectedHeader,
        super::rejections::CauseCount, super::rejections::RejectionPage
    )),
    modifiers(&BearerScheme),
)]
pub struct ApiDoc;

struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// The document (other routers' paths are merged in by whoever mounts them).
pub fn spec() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(spec())
}
