// Names and messages of the built-in admission plugins this webhook mirrors,
// spelled as upstream spells them (plugin/pkg/admission/storage/...,
// pkg/apis/core/validation, pkg/api/persistentvolume[claim]/util.go).

export const waitForFirstConsumer = "WaitForFirstConsumer";

export const message = {
  // PersistentVolumeClaimResize
  onlyBoundCanExpand: "Only bound persistent volume claims can be expanded",
  classMustAllowResize:
    "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize",
  // ValidatePersistentVolumeClaimUpdate
  claimSpecImmutable:
    "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
  // With RecoverVolumeExpansionFailure (GA, locked on since 1.34) a request may be lowered, not to status.capacity.
  belowCapacity: "field can not be less than status.capacity",
  attributesClassToNil: "update from non-nil value to nil is forbidden",
  attributesClassToEmpty: "update from non-nil value to an empty string is forbidden",
  fieldImmutable: "field is immutable",
  // ValidateVolumeAttachment
  exactlyOneSource: "must specify exactly one of inlineVolumeSpec and persistentVolumeName",
  nonEmptyVolumeName: "must specify non empty persistentVolumeName",
  // GetWarningsForPersistentVolume[Claim]
  deprecatedBetaClass: 'deprecated since v1.8; use "storageClassName" attribute instead',
  deprecatedRecycle:
    "The Recycle reclaim policy is deprecated. Instead, the recommended approach is to use dynamic provisioning.",
  fractionalBytes: (value: string) => `fractional byte value "${value}" is invalid, must be an integer`,
} as const;
