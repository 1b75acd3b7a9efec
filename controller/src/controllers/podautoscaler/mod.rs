//! The HorizontalPodAutoscaler's arithmetic (upstream `pkg/controller/podautoscaler`): the
//! replicas a resource metric asks for ([`replicas`]) and how the behaviour's stabilization
//! windows, scaling policies and bounds turn that into the replicas to set ([`behavior`]).
//! The controller that applies them to a target's `scale` subresource is not written yet.

pub mod behavior;
pub mod replicas;
