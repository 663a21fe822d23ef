export function Breadcrumb({ crumbs, current }: { crumbs: string[]; current: string }) {
  return (
    <nav class="breadcrumb" aria-label="Breadcrumb">
      <ol>
        <li>
          <a href="/">All products</a>
        </li>
        {crumbs.map((crumb) => (
          <li>{crumb}</li>
        ))}
        <li aria-current="page">{current}</li>
      </ol>
    </nav>
  );
}
