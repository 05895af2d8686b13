//! Publishing the ValidatingAdmissionPolicy controller's Events off the reconcile path.
//!
//! A policy's status is what vapcheck owes; its Events are a courtesy. A reconcile therefore
//! queues them and goes on, as client-go's recorders do (k8s.io/client-go `tools/events`,
//! `eventBroadcasterImpl`, and `tools/record`, `maxQueuedEvents = 1000`: the caller never waits
//! for the API server, and an Event that does not fit in the queue is dropped). Before this, a
//! reconcile awaited each Event's create: when kube-apiserver held Event creates after an etcd
//! restart (Events are stored with a TTL, so each create may wait for an etcd lease grant behind
//! one lock: k8s.io/apiserver `storage/etcd3/lease_manager.go`, `leaseManager.GetLease`), every
//! worker waited with it and the statuses of other policies were not written.
//!
//! One task publishes the queued Events in order, each attempt bounded by [`PUBLISH_TIMEOUT`],
//! and only while the fence allows writes: an Event queued by a leader that may since have lost
//! its lease is dropped, like its status writes. An attempt that timed out, failed on the way
//! or was answered 429 or 5xx (an etcd outage answers 500) is tried again, up to
//! [`RETRIES`]`.tries` attempts with pauses of [`RETRIES`]`.pause` (less up to a quarter), as
//! client-go's `attemptRecording` does (12 tries, 10 s apart with jitter; it does not retry
//! a 5xx answer, which vapcheck does, so that an Event is not lost to an etcd restart).
//! Another refusal (an invalid Event) is logged and not tried again.
//!
//! Most Events go through kube-runtime's `Recorder`, which folds an Event with the same type,
//! reason, action and object (fieldPath included) published within 6 minutes into a `series`
//! of the first one and keeps the first one's note. The webhook watcher's Events are queued
//! with [`EventQueue::send_unfolded`] and created one by one ([`create_unfolded`]): a webhook
//! problem that clears and comes back within 6 minutes gets an Event of its own, with the note
//! of now (a new expiry time, say).

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::runtime::events::{Event, EventType, Recorder};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::lease::Fence;

/// Events waiting to be published at most; more are dropped (client-go: 1000).
pub const QUEUE_CAPACITY: usize = 1000;

/// How long one attempt at an Event's create (or series patch) may take.
pub const PUBLISH_TIMEOUT: Duration = Duration::from_secs(5);

/// How often, and how far apart, an Event is tried.
#[derive(Debug, Clone, Copy)]
pub struct Retries {
    /// Attempts in all, the first included.
    pub tries: u32,
    /// The pause before another attempt, less a random part of up to a quarter.
    pub pause: Duration,
    /// The bound on each attempt.
    pub timeout: Duration,
}

/// client-go's numbers (k8s.io/client-go `tools/events/event_broadcaster.go`:
/// `maxTriesPerEvent = 12`, `defaultSleepDuration = 10 * time.Second`), with
/// [`PUBLISH_TIMEOUT`] on each attempt.
pub const RETRIES: Retries = Retries {
    tries: 12,
    pause: Duration::from_secs(10),
    timeout: PUBLISH_TIMEOUT,
};

/// How a queued Event is published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Through the `Recorder` (repeats folded into a series).
    Recorder,
    /// Created as a new Event every time ([`create_unfolded`]).
    Unfolded,
}

/// One queued Event.
type Queued = (Event, ObjectReference, Route);

/// The sending side, kept in the controller's context. Cheap to clone.
#[derive(Clone, Debug)]
pub struct EventQueue {
    tx: mpsc::Sender<Queued>,
}

/// The receiving side, handed to [`publish_queued`] once.
#[derive(Debug)]
pub struct QueuedEvents {
    rx: mpsc::Receiver<Queued>,
}

/// A new queue of [`QUEUE_CAPACITY`] Events.
pub fn queue() -> (EventQueue, QueuedEvents) {
    queue_with_capacity(QUEUE_CAPACITY)
}

fn queue_with_capacity(capacity: usize) -> (EventQueue, QueuedEvents) {
    let (tx, rx) = mpsc::channel(capacity);
    (EventQueue { tx }, QueuedEvents { rx })
}

impl EventQueue {
    /// Queues `event` about `regarding` without waiting. Returns false (and logs) when it was
    /// dropped: the queue is full, or nothing publishes any more.
    pub fn send(&self, event: Event, regarding: ObjectReference) -> bool {
        self.queue(event, regarding, Route::Recorder)
    }

    /// [`EventQueue::send`] for an Event that must not be folded into an earlier one's series
    /// ([`create_unfolded`]).
    pub fn send_unfolded(&self, event: Event, regarding: ObjectReference) -> bool {
        self.queue(event, regarding, Route::Unfolded)
    }

    fn queue(&self, event: Event, regarding: ObjectReference, route: Route) -> bool {
        match self.tx.try_send((event, regarding, route)) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full((event, regarding, _))) => {
                warn!(
                    reason = %event.reason,
                    object = regarding.name.as_deref().unwrap_or_default(),
                    capacity = self.tx.max_capacity(),
                    "an event was dropped: the queue of unpublished events is full"
                );
                false
            }
            Err(mpsc::error::TrySendError::Closed((event, _, _))) => {
                debug!(reason = %event.reason, "an event was dropped: publishing has stopped");
                false
            }
        }
    }
}

/// What one attempt at publishing an Event came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    Done,
    /// Refused or failed; `retry`: worth another attempt (on the way, 429, 5xx).
    Failed {
        retry: bool,
    },
    TimedOut,
    /// Not sent: this replica may not write (now).
    Fenced,
}

impl Published {
    fn retry(self) -> bool {
        matches!(
            self,
            Published::Failed { retry: true } | Published::TimedOut
        )
    }
}

/// Whether a failed attempt is worth another: it failed on the way, or the API server could
/// not serve it then (429, 5xx); not when it refused the Event itself.
fn worth_retrying(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        _ => true,
    }
}

/// Publishes the queued Events in order until every [`EventQueue`] is dropped and the queue
/// is empty, each with `retries`. `publish` is the Recorder's publish (or [`create_unfolded`],
/// by the [`Route`]) in the controller and a fake in tests.
pub async fn publish_queued<F, Fut>(
    mut queued: QueuedEvents,
    fence: Fence,
    retries: Retries,
    mut publish: F,
) where
    F: FnMut(Event, ObjectReference, Route) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let mut seed = u64::from(std::process::id()) | 1;
    let tries = retries.tries.max(1);
    while let Some((event, regarding, route)) = queued.rx.recv().await {
        for attempt in 1..=tries {
            let outcome = publish_one(
                &fence,
                &mut publish,
                copy(&event),
                regarding.clone(),
                route,
                retries.timeout,
            )
            .await;
            if !outcome.retry() || attempt == tries {
                if outcome.retry() {
                    warn!(reason = %event.reason, tries, "an event was dropped: every attempt failed");
                }
                break;
            }
            tokio::time::sleep(super::watch::jittered(retries.pause, &mut seed)).await;
        }
    }
}

/// kube-runtime's `Event` is not `Clone`.
fn copy(event: &Event) -> Event {
    Event {
        type_: event.type_,
        reason: event.reason.clone(),
        note: event.note.clone(),
        action: event.action.clone(),
        secondary: event.secondary.clone(),
    }
}

async fn publish_one<F, Fut>(
    fence: &Fence,
    publish: &mut F,
    event: Event,
    regarding: ObjectReference,
    route: Route,
    timeout: Duration,
) -> Published
where
    F: FnMut(Event, ObjectReference, Route) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    if !fence.may_write() {
        debug!(reason = %event.reason, "an event was dropped: this replica may not write");
        return Published::Fenced;
    }
    let reason = event.reason.clone();
    let object = regarding.name.clone().unwrap_or_default();
    match tokio::time::timeout(timeout, publish(event, regarding, route)).await {
        Ok(Ok(())) => Published::Done,
        Ok(Err(e)) => {
            let retry = worth_retrying(&e);
            warn!(error = %e, reason, object, retry, "could not publish an event");
            Published::Failed { retry }
        }
        Err(_) => {
            warn!(
                ?timeout,
                reason, object, "could not publish an event: the API server did not answer in time"
            );
            Published::TimedOut
        }
    }
}

/// Publishes through `recorder`, or as new Events of reporting instance `identity` through
/// `client` ([`Route::Unfolded`]): what the controller runs.
pub async fn publish_with_recorder(
    queued: QueuedEvents,
    fence: Fence,
    recorder: Recorder,
    client: kube::Client,
    identity: String,
) {
    publish_queued(queued, fence, RETRIES, |event, regarding, route| {
        let recorder = recorder.clone();
        let client = client.clone();
        let identity = identity.clone();
        async move {
            match route {
                Route::Recorder => recorder.publish(&event, &regarding).await,
                Route::Unfolded => create_unfolded(&client, &identity, &event, regarding).await,
            }
        }
    })
    .await;
}

/// Creates `event` about `regarding` as a new `events.k8s.io/v1` Event (named
/// `<object>-<random>`), never folded into an earlier one: what the Recorder writes for a
/// first Event (namespace `default` for a cluster-scoped object, `reportingController`
/// vapcheck's, `reportingInstance` `identity`).
pub async fn create_unfolded(
    client: &kube::Client,
    identity: &str,
    event: &Event,
    regarding: ObjectReference,
) -> Result<(), kube::Error> {
    let namespace = regarding
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    // generateName within the 253-character limit (a trailing '-' is allowed, a '.' is not).
    let mut prefix: String = regarding.name.clone().unwrap_or_default();
    let mut end = prefix.len().min(230);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    prefix.truncate(end);
    prefix.push('-');
    let object = KubeEvent {
        metadata: ObjectMeta {
            generate_name: Some(prefix),
            namespace: Some(namespace.clone()),
            ..ObjectMeta::default()
        },
        action: Some(event.action.clone()),
        reason: Some(event.reason.clone()),
        note: event.note.clone(),
        type_: Some(
            match event.type_ {
                EventType::Warning => "Warning",
                EventType::Normal => "Normal",
            }
            .to_owned(),
        ),
        regarding: Some(regarding),
        related: event.secondary.clone(),
        reporting_controller: Some(crate::metrics::CONTROLLER_NAME.to_owned()),
        reporting_instance: Some(identity.to_owned()),
        event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
        ..KubeEvent::default()
    };
    Api::<KubeEvent>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &object)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::events::EventType;
    use std::sync::{Arc, Mutex};

    fn event(reason: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: reason.to_owned(),
            note: None,
            action: "TypeCheck".to_owned(),
            secondary: None,
        }
    }

    fn regarding(name: &str) -> ObjectReference {
        ObjectReference {
            name: Some(name.to_owned()),
            ..ObjectReference::default()
        }
    }

    #[tokio::test]
    async fn each_event_is_published_by_the_route_it_was_queued_with() {
        let (queue, queued) = queue_with_capacity(4);
        let fence = Fence::default();
        fence.allow_always();
        let seen = Arc::new(Mutex::new(Vec::new()));
        assert!(queue.send(event("folded"), regarding("p")));
        assert!(queue.send_unfolded(event("unfolded"), regarding("w")));
        drop(queue);
        let record = Arc::clone(&seen);
        publish_queued(queued, fence, RETRIES, move |event, regarding, route| {
            record
                .lock()
                .unwrap()
                .push((event.reason, regarding.name.unwrap_or_default(), route));
            std::future::ready(Ok(()))
        })
        .await;
        assert_eq!(
            *seen.lock().unwrap(),
            [
                ("folded".to_owned(), "p".to_owned(), Route::Recorder),
                ("unfolded".to_owned(), "w".to_owned(), Route::Unfolded),
            ]
        );
    }

    #[tokio::test]
    async fn sending_does_not_wait_for_a_publish_that_hangs_and_the_rest_follow_in_order() {
        let (queue, queued) = queue_with_capacity(4);
        let fence = Fence::default();
        fence.allow_always();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (release_tx, release_rx) = tokio::sync::watch::channel(false);
        let worker = {
            let seen = Arc::clone(&seen);
            tokio::spawn(publish_queued(
                queued,
                fence,
                RETRIES,
                move |event, _, _| {
                    let seen = Arc::clone(&seen);
                    let mut release = release_rx.clone();
                    async move {
                        // The first publish hangs until released, as a create held by the API
                        // server would.
                        if event.reason == "first" {
                            let _ = release.wait_for(|released| *released).await;
                        }
                        seen.lock().unwrap().push(event.reason);
                        Ok(())
                    }
                },
            ))
        };
        // Four sends fit although the first publish hangs; none of them waits.
        for reason in ["first", "second", "third", "fourth"] {
            assert!(queue.send(event(reason), regarding("p")));
            tokio::task::yield_now().await;
        }
        // The worker holds "first"; three wait in the queue and one more fits.
        assert!(queue.send(event("fifth"), regarding("p")));
        // The sixth does not fit: it is dropped, not waited for.
        assert!(!queue.send(event("sixth"), regarding("p")));
        assert!(seen.lock().unwrap().is_empty());
        release_tx.send(true).unwrap();
        drop(queue);
        worker.await.unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            ["first", "second", "third", "fourth", "fifth"]
        );
    }

    #[tokio::test]
    async fn an_event_is_tried_again_after_a_timeout_or_a_5xx_but_not_after_a_refusal() {
        let fence = Fence::default();
        fence.allow_always();
        let retries = Retries {
            tries: 4,
            pause: Duration::from_millis(1),
            timeout: Duration::from_millis(50),
        };
        let api = |code: u16| {
            kube::Error::Api(
                kube::core::Status::failure("refused", "Refused")
                    .with_code(code)
                    .boxed(),
            )
        };
        /// An event's reason and the answer to that attempt (None: no answer at all).
        type Attempt = (String, Option<u16>);
        let script: Arc<Mutex<Vec<Attempt>>> = Arc::new(Mutex::new(vec![
            ("etcd-down".into(), None),
            ("etcd-down".into(), Some(500)),
            ("etcd-down".into(), Some(429)),
            ("etcd-down".into(), Some(201)),
            ("invalid".into(), Some(422)),
            ("always-down".into(), Some(503)),
            ("always-down".into(), Some(503)),
            ("always-down".into(), Some(503)),
            ("always-down".into(), Some(503)),
            ("after".into(), Some(201)),
        ]));
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let (queue, queued) = queue_with_capacity(8);
        for reason in ["etcd-down", "invalid", "always-down", "after"] {
            assert!(queue.send(event(reason), regarding("p")));
        }
        drop(queue);
        {
            let script = Arc::clone(&script);
            let attempts = Arc::clone(&attempts);
            publish_queued(queued, fence, retries, move |event, _, _| {
                attempts.lock().unwrap().push(event.reason.clone());
                let (expected, answer) = script.lock().unwrap().remove(0);
                assert_eq!(expected, event.reason);
                async move {
                    match answer {
                        None => std::future::pending().await,
                        Some(201) => Ok(()),
                        Some(code) => Err(api(code)),
                    }
                }
            })
            .await;
        }
        assert!(script.lock().unwrap().is_empty());
        assert_eq!(
            *attempts.lock().unwrap(),
            [
                "etcd-down",
                "etcd-down",
                "etcd-down",
                "etcd-down",
                "invalid",
                "always-down",
                "always-down",
                "always-down",
                "always-down",
                "after"
            ]
        );
    }

    #[tokio::test]
    async fn a_publish_that_never_answers_is_given_up_after_the_timeout() {
        let fence = Fence::default();
        fence.allow_always();
        let mut hang = |_: Event, _: ObjectReference, _: Route| {
            std::future::pending::<Result<(), kube::Error>>()
        };
        let timeout = Duration::from_millis(50);
        let started = tokio::time::Instant::now();
        let outcome = publish_one(
            &fence,
            &mut hang,
            event("e"),
            regarding("p"),
            Route::Recorder,
            timeout,
        )
        .await;
        assert_eq!(outcome, Published::TimedOut);
        assert!(started.elapsed() >= timeout);
    }

    #[tokio::test]
    async fn nothing_is_published_while_the_fence_forbids_writes() {
        let fence = Fence::default();
        let mut calls = 0;
        let mut count = |_: Event, _: ObjectReference, _: Route| {
            calls += 1;
            std::future::ready(Ok(()))
        };
        let mut outcomes = Vec::new();
        for allowed in [false, true] {
            if allowed {
                fence.allow_always();
            }
            let outcome = publish_one(
                &fence,
                &mut count,
                event("e"),
                regarding("p"),
                Route::Recorder,
                PUBLISH_TIMEOUT,
            );
            outcomes.push(outcome.await);
        }
        assert_eq!(outcomes, [Published::Fenced, Published::Done]);
        assert_eq!(calls, 1);
    }
}
