// Client side of the GEAR report: builds the rows from the JSON data block (#gear-data) that the
// renderer fills, and recolours them on the metric switch. Plain browser JS, inlined by
// scripts/bundle-assets.mjs; it never reads data from anywhere else.
(function(){
'use strict';
var D=JSON.parse(document.getElementById('gear-data').textContent);
function lerp(a,b,t){return Math.round(a+(b-a)*t);}
function colour(metric,x){
  var s=D.scales[metric],dom=D.domain[metric],lo=dom[0],hi=dom[1],t;
  if(metric==='weight'){
    if(x>=1){t=hi>1?0.5+0.5*Math.min((x-1)/(hi-1),1):0.5;}else{t=lo<1?0.5-0.5*Math.min((1-x)/(1-lo),1):0.5;}
  }else{t=hi>lo?Math.min(Math.max((x-lo)/(hi-lo),0),1):0;}
  var a,b,u;if(t<=0.5){a=s[0];b=s[1];u=t*2;}else{a=s[1];b=s[2];u=(t-0.5)*2;}
  return [lerp(a[0],b[0],u),lerp(a[1],b[1],u),lerp(a[2],b[2],u)];
}
function fmt(x){return Math.abs(x)>=100||x===Math.round(x)?String(x):x.toPrecision(4);}
var rowsEl=document.getElementById('rows');
var initial=document.querySelector('input[name=metric][value="'+D.metric+'"]');
if(initial)initial.checked=true;
var toks=[];
for(var r=0;r<D.rows;r++){
  var b=D.offsets[r],e=D.offsets[r+1],A=D.adv[r];
  var nseg={},nvalid=0;
  var row=document.createElement('section');
  row.className='row '+(A>0?'pos':A<0?'neg':'zero');row.dataset.row=r;
  var head=document.createElement('div');head.className='rowhead';
  var badge=document.createElement('span');badge.className='badge '+(A>0?'pos':A<0?'neg':'zero');
  badge.textContent=(A>0?'+':A<0?'\u2212':'')+fmt(Math.abs(A));
  var body=document.createElement('div');body.className='toks';
  var cur=null,curId=-1;
  for(var t=b;t<e;t++){
    var m=D.mask?D.mask[t]===1:true;if(m)nvalid++;
    var sp=document.createElement('span');
    var txt=D.tokens?D.tokens[t].replace(/\n/g,'\u21b5'):'';
    sp.className='tok'+(D.tokens?'':' cell')+(m?'':' masked');
    sp.textContent=txt===''?'\u2009':txt;
    sp.dataset.t=t;sp.dataset.d=D.d[t];sp.dataset.h=D.h[t];sp.dataset.w=D.w[t];
    var sid=D.seg[t];
    sp.title='token '+t+(m?'':' (masked)')+'\nD = '+fmt(D.d[t])+'\nH = '+fmt(D.h[t])+'\nweight = '+fmt(D.w[t])+'\nadvantage = '+fmt(D.a[t])+(sid>=0?'\nsegment '+sid+(D.anchors[sid]===t?' (anchor)':''):'');
    if(sid>=0){
      nseg[sid]=1;
      if(sid!==curId){cur=document.createElement('span');cur.className='seg';cur.dataset.seg=sid;body.appendChild(cur);curId=sid;}
      if(D.anchors[sid]===t)sp.classList.add('anchor');
      cur.appendChild(sp);
    }else{curId=-1;body.appendChild(sp);}
    if(m)toks.push(sp);
  }
  var ns=Object.keys(nseg).length;
  row.dataset.segments=ns;
  head.innerHTML='<b>row '+r+'</b>';
  head.appendChild(badge);
  var info=document.createElement('span');
  info.textContent=(D.labels?D.labels[r]+' \u00b7 ':'')+(e-b)+' tokens, '+nvalid+' valid \u00b7 '+ns+' segment'+(ns===1?'':'s');
  head.appendChild(info);
  row.appendChild(head);row.appendChild(body);rowsEl.appendChild(row);
}
function key(metric){return metric==='divergence'?'d':metric==='entropy'?'h':'w';}
function paint(metric){
  var k=key(metric);
  for(var i=0;i<toks.length;i++){
    var sp=toks[i],c=colour(metric,Number(sp.dataset[k]));
    sp.style.backgroundColor='rgb('+c[0]+','+c[1]+','+c[2]+')';
    sp.style.color=(0.299*c[0]+0.587*c[1]+0.114*c[2])<140?'#fff':'#111';
  }
  var svg=document.getElementById('legend-bar'),s=D.scales[metric],dom=D.domain[metric];
  var ns='http://www.w3.org/2000/svg';
  while(svg.firstChild)svg.removeChild(svg.firstChild);
  var defs=document.createElementNS(ns,'defs'),g=document.createElementNS(ns,'linearGradient');
  g.setAttribute('id','lg');
  for(var j=0;j<3;j++){var st=document.createElementNS(ns,'stop');st.setAttribute('offset',(j*50)+'%');st.setAttribute('stop-color','rgb('+s[j].join(',')+')');g.appendChild(st);}
  defs.appendChild(g);svg.appendChild(defs);
  var rect=document.createElementNS(ns,'rect');rect.setAttribute('x','0');rect.setAttribute('y','0');rect.setAttribute('width','260');rect.setAttribute('height','14');rect.setAttribute('fill','url(#lg)');rect.setAttribute('stroke','#ccc');svg.appendChild(rect);
  var labels=metric==='weight'?[[0,fmt(dom[0]),'start'],[130,'1','middle'],[260,fmt(dom[1]),'end']]:[[0,fmt(dom[0]),'start'],[260,fmt(dom[1])+(metric==='divergence'?' nats':''),'end']];
  for(var l=0;l<labels.length;l++){var tx=document.createElementNS(ns,'text');tx.setAttribute('x',labels[l][0]);tx.setAttribute('y','28');tx.setAttribute('font-size','11');tx.setAttribute('text-anchor',labels[l][2]);tx.setAttribute('fill','#555');tx.textContent=labels[l][1];svg.appendChild(tx);}
  document.body.dataset.metric=metric;
}
var radios=document.querySelectorAll('input[name=metric]');
for(var q=0;q<radios.length;q++)radios[q].addEventListener('change',function(ev){paint(ev.target.value);});
document.getElementById('only-seg').addEventListener('change',function(ev){
  var rs=document.querySelectorAll('.row');
  for(var i=0;i<rs.length;i++)rs[i].classList.toggle('hidden',ev.target.checked&&rs[i].dataset.segments==='0');
});
paint(D.metric);
})();
