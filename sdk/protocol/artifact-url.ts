/**
 * Artifact URLs. The gateway hands them out (the upload's answer, which workers put in
 * `output.urls`) and later reads them back (a private run's receipt is checked against the
 * artifacts its URLs name), so the format is written once, here. Only the syntax lives here:
 * whether an id is one the store could have made is the store's business (models/).
 */

const ARTIFACTS_PATH = '/v1/artifacts/';

export interface ArtifactRef {
  id: string;
  name: string;
}

/** The public download URL of an artifact: `{publicUrl}/v1/artifacts/{id}/{name}`. */
export function artifactUrl(publicUrl: string, artifact: ArtifactRef): string {
  return `${publicUrl}${ARTIFACTS_PATH}${artifact.id}/${encodeURIComponent(artifact.name)}`;
}

/** The artifact a URL built by `artifactUrl` for this `publicUrl` names; null for any other URL. */
export function parseArtifactUrl(publicUrl: string, url: string): ArtifactRef | null {
  const base = `${publicUrl}${ARTIFACTS_PATH}`;
  if (!url.startsWith(base)) return null;
  const [id, encoded, ...rest] = url.slice(base.length).split('/');
  if (encoded === undefined || rest.length > 0) return null;
  try {
    return { id, name: decodeURIComponent(encoded) };
  } catch {
    // not percent-encoded properly: not one of ours
    return null;
  }
}

/** Where a lease's artifacts are uploaded (the `upload_url` of its lease frame). */
export function leaseUploadUrl(publicUrl: string, leaseId: string): string {
  return `${publicUrl}/v1/leases/${leaseId}/artifacts`;
}

/** Where a lease's worker fetches the file of input field `field` (with the lease's upload token). */
export function leaseFileUrl(publicUrl: string, leaseId: string, field: string): string {
  return `${publicUrl}/v1/leases/${encodeURIComponent(leaseId)}/files/${encodeURIComponent(field)}`;
}
