//! The OpenAPI 3.1 document of the operator API, generated from the handlers' annotations
//! and the answer types (`utoipa`), served at `/openapi.json` without a token.

use axum::Json;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::error::ErrorBody;
use super::types::{
    Attempts, AuditEntry, AuditPage, Delivery, EventDetail, EventPage, EventSummary, HeldRelease,
    OperationDone, Payload, Released, ReplayRequest,
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
        super::events::release,
        super::audit::list,
        super::jobs::create,
        super::jobs::list,
        super::jobs::show,
        super::jobs::pause,
        super::jobs::resume,
        super::jobs::cancel,
        super::rejections::list,
        super::reconcile::start,
        super::reconcile::show_run,
        super::reconcile::findings,
    ),
    components(schemas(
        ErrorBody, EventSummary, EventPage, Attempts, Delivery, EventDetail, Payload,
        ReplayRequest, HeldRelease, Released, OperationDone, AuditEntry, AuditPage,
        super::jobs::JobRequest, super::jobs::JobCreated, super::jobs::JobProgress,
        super::jobs::Job, super::jobs::JobPage,
        super::rejections::Rejection, super::rejections::RejectedHeader,
        super::rejections::CauseCount, super::rejections::RejectionPage,
        super::reconcile::ReconcileRequest, super::reconcile::ReconcileStarted,
        super::reconcile::ReconcileRun, super::reconcile::Finding, super::reconcile::FindingPage
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_document_is_openapi_3_1_with_every_route_and_the_bearer_scheme() {
        let doc = serde_json::to_value(super::spec()).unwrap();
        assert!(
            doc["openapi"].as_str().unwrap().starts_with("3.1"),
            "{}",
            doc["openapi"]
        );
        for (path, method) in [
            ("/api/v1/events", "get"),
            ("/api/v1/events/{id}", "get"),
            ("/api/v1/events/{id}/payload", "get"),
            ("/api/v1/events/{id}/retry", "post"),
            ("/api/v1/events/{id}/replay", "post"),
            ("/api/v1/audit", "get"),
        ] {
            let op = &doc["paths"][path][method];
            assert!(op.is_object(), "{method} {path}");
            assert!(
                op["responses"]["401"].is_object(),
                "{method} {path} documents 401"
            );
        }
        assert_eq!(
            doc["components"]["securitySchemes"]["bearer"]["scheme"],
            "bearer"
        );
        for schema in [
            "EventPage",
            "EventDetail",
            "ErrorBody",
            "AuditPage",
            "Payload",
        ] {
            assert!(doc["components"]["schemas"][schema].is_object(), "{schema}");
        }
    }
}
