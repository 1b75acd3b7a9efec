//! The built-in local-path provisioner's names, shared by admission, the controller's
//! provisioner and the agent (which publishes its directory and removes released volumes).

/// The provisioner name of the built-in local-path provisioner.
pub const LOCAL_PATH_PROVISIONER: &str = "berth.io/local-path";
/// The built-in local-path StorageClass.
pub const LOCAL_PATH_CLASS: &str = "local-path";
/// The node annotation where an agent publishes its local-path directory.
pub const LOCAL_PATH_DIR_ANNOTATION: &str = "storage.berth.io/local-path-dir";
/// The finalizer a local-path volume keeps until its node's agent removed the directory.
pub const LOCAL_PATH_CLEANUP: &str = "storage.berth.io/local-path-cleanup";
/// The local-path directory when neither the node nor the class names one.
pub const DEFAULT_LOCAL_PATH_DIR: &str = "/var/lib/berth-agent/storage";
