//! The subset of gnostic's `OpenAPIv2.proto` (package `openapi.v2`) that `/openapi/v2` needs,
//! as prost messages with gnostic's field numbers; each `oneof` is written as the optional
//! fields it is on the wire (at most one of them set).

use prost::Message;
use std::fmt::Debug;

/// gnostic's `Named…` messages (`NamedSchema`, `NamedAny` …): a name and a value.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Named<T: Message + Default + Clone + PartialEq + Debug> {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<T>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Document {
    #[prost(string, tag = "1")]
    pub swagger: String,
    #[prost(message, optional, tag = "2")]
    pub info: Option<Info>,
    #[prost(message, optional, tag = "8")]
    pub paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    pub definitions: Option<Definitions>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Info {
    #[prost(string, tag = "1")]
    pub title: String,
    #[prost(string, tag = "2")]
    pub version: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Paths {
    #[prost(message, repeated, tag = "2")]
    pub path: Vec<NamedPathItem>,
}

pub(crate) type NamedPathItem = Named<PathItem>;

#[derive(Clone, PartialEq, Message)]
pub(crate) struct PathItem {
    #[prost(message, optional, tag = "2")]
    pub get: Option<Operation>,
    #[prost(message, optional, tag = "3")]
    pub put: Option<Operation>,
    #[prost(message, optional, tag = "4")]
    pub post: Option<Operation>,
    #[prost(message, optional, tag = "5")]
    pub delete: Option<Operation>,
    #[prost(message, optional, tag = "8")]
    pub patch: Option<Operation>,
    #[prost(message, repeated, tag = "9")]
    pub parameters: Vec<ParametersItem>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Operation {
    #[prost(string, repeated, tag = "1")]
    pub tags: Vec<String>,
    #[prost(string, tag = "5")]
    pub operation_id: String,
    #[prost(string, repeated, tag = "6")]
    pub produces: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    pub consumes: Vec<String>,
    #[prost(message, repeated, tag = "8")]
    pub parameters: Vec<ParametersItem>,
    #[prost(message, optional, tag = "9")]
    pub responses: Option<Responses>,
    #[prost(message, repeated, tag = "13")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `oneof { Parameter parameter = 1; JsonReference json_reference = 2; }`
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ParametersItem {
    #[prost(message, optional, tag = "1")]
    pub parameter: Option<Parameter>,
}

/// `oneof { BodyParameter body_parameter = 1; NonBodyParameter non_body_parameter = 2; }`
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Parameter {
    #[prost(message, optional, tag = "1")]
    pub body_parameter: Option<BodyParameter>,
    #[prost(message, optional, tag = "2")]
    pub non_body_parameter: Option<NonBodyParameter>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct BodyParameter {
    #[prost(string, tag = "1")]
    pub description: String,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "3")]
    pub r#in: String,
    #[prost(bool, tag = "4")]
    pub required: bool,
    #[prost(message, optional, tag = "5")]
    pub schema: Option<Schema>,
}

/// `oneof { header = 1; form_data = 2; QueryParameterSubSchema = 3; PathParameterSubSchema = 4 }`
#[derive(Clone, PartialEq, Message)]
pub(crate) struct NonBodyParameter {
    #[prost(message, optional, tag = "3")]
    pub query_parameter_sub_schema: Option<QueryParameterSubSchema>,
    #[prost(message, optional, tag = "4")]
    pub path_parameter_sub_schema: Option<PathParameterSubSchema>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct QueryParameterSubSchema {
    #[prost(bool, tag = "1")]
    pub required: bool,
    #[prost(string, tag = "2")]
    pub r#in: String,
    #[prost(string, tag = "3")]
    pub description: String,
    #[prost(string, tag = "4")]
    pub name: String,
    #[prost(string, tag = "6")]
    pub r#type: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct PathParameterSubSchema {
    #[prost(bool, tag = "1")]
    pub required: bool,
    #[prost(string, tag = "2")]
    pub r#in: String,
    #[prost(string, tag = "3")]
    pub description: String,
    #[prost(string, tag = "4")]
    pub name: String,
    #[prost(string, tag = "5")]
    pub r#type: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Responses {
    #[prost(message, repeated, tag = "1")]
    pub response_code: Vec<NamedResponseValue>,
}

pub(crate) type NamedResponseValue = Named<ResponseValue>;

/// `oneof { Response response = 1; JsonReference json_reference = 2; }`
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ResponseValue {
    #[prost(message, optional, tag = "1")]
    pub response: Option<Response>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Response {
    #[prost(string, tag = "1")]
    pub description: String,
    #[prost(message, optional, tag = "2")]
    pub schema: Option<SchemaItem>,
}

/// `oneof { Schema schema = 1; FileSchema file_schema = 2; }`
#[derive(Clone, PartialEq, Message)]
pub(crate) struct SchemaItem {
    #[prost(message, optional, tag = "1")]
    pub schema: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Definitions {
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedSchema>,
}

pub(crate) type NamedSchema = Named<Schema>;

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Schema {
    #[prost(string, tag = "1")]
    pub r#ref: String,
    #[prost(string, tag = "2")]
    pub format: String,
    #[prost(string, tag = "4")]
    pub description: String,
    #[prost(message, optional, tag = "21")]
    pub additional_properties: Option<AdditionalPropertiesItem>,
    #[prost(message, optional, tag = "22")]
    pub r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    pub items: Option<ItemsItem>,
    #[prost(message, optional, tag = "25")]
    pub properties: Option<Properties>,
    #[prost(message, repeated, tag = "31")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `oneof { Schema schema = 1; bool boolean = 2; }`
#[derive(Clone, PartialEq, Message)]
pub(crate) struct AdditionalPropertiesItem {
    #[prost(message, optional, boxed, tag = "1")]
    pub schema: Option<Box<Schema>>,
    #[prost(bool, optional, tag = "2")]
    pub boolean: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    pub value: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    pub schema: Vec<Schema>,
}

/// gnostic's `Properties` has the shape of its `Definitions`.
pub(crate) type Properties = Definitions;

pub(crate) type NamedAny = Named<Any>;

/// gnostic's `Any`: the value as YAML text (JSON is YAML).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Any {
    #[prost(string, tag = "2")]
    pub yaml: String,
}
